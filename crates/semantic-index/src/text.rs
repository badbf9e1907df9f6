//! Words of code and of prose, as both BM25 and the embedders see them.

/// Splits text into lower-case words: runs of letters and digits, with identifiers cut at `_`
/// and at camelCase boundaries (`parseHTTPResponse2` → `parse`, `http`, `response2`).
pub fn identifier_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for ident in text.split(|c: char| !c.is_alphanumeric()) {
        split_camel(ident, &mut words);
    }
    words
}

fn split_camel(ident: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = ident.chars().collect();
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, cur) = (chars[i - 1], chars[i]);
        let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
        // A new word starts at `aB`, and at the last capital of a run followed by lower case
        // (`HTTPResponse` → `HTTP`, `Response`).
        if cur.is_uppercase()
            && (prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower))
        {
            out.push(chars[start..i].iter().collect::<String>().to_lowercase());
            start = i;
        }
    }
    if start < chars.len() {
        out.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
}

/// The terms BM25 indexes and queries: [`identifier_words`] of at least two characters, lightly
/// stemmed (a plural `s` dropped), plus each compound identifier whole (`getusername`), so that an
/// exact identifier in a query still scores above its parts.
pub fn sub_tokens(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for ident in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let mut parts = Vec::new();
        for piece in ident.split('_') {
            split_camel(piece, &mut parts);
        }
        parts.retain(|p| p.chars().count() >= 2);
        if parts.len() > 1 {
            terms.push(parts.concat());
        }
        terms.extend(parts.into_iter().map(stem));
    }
    terms
}

/// Drops a plural `s` (`files` → `file`, not `class` or `is`), the one inflection that separates
/// prose (`Returns the names`) from code (`return name`) most often.
fn stem(word: String) -> String {
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        word[..word.len() - 1].to_owned()
    } else {
        word
    }
}

/// Text as the embedders read it: identifiers cut into words, so that `getUserName` reaches the
/// word-piece vocabulary as `get user name` rather than as `getuse ##rna ##me`.
pub fn for_embedding(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            let mut parts = Vec::new();
            split_camel(word, &mut parts);
            out.push_str(&parts.join(" "));
            word.clear();
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(if c == '_' { ' ' } else { c });
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, words: &[&str], terms: &[&str]) {
        assert_eq!(identifier_words(input), words, "words of {input:?}");
        assert_eq!(sub_tokens(input), terms, "terms of {input:?}");
    }

    #[test]
    fn identifiers_split_into_sub_tokens() {
        check(
            "getUserName",
            &["get", "user", "name"],
            &["getusername", "get", "user", "name"],
        );
        check(
            "snake_case_files",
            &["snake", "case", "files"],
            &["snakecasefiles", "snake", "case", "file"],
        );
        check(
            "parseHTTPResponse",
            &["parse", "http", "response"],
            &["parsehttpresponse", "parse", "http", "response"],
        );
        check("a class is", &["a", "class", "is"], &["class", "is"]);
        check("x2y", &["x2y"], &["x2y"]);
    }

    #[test]
    fn embedding_text_spells_identifiers_as_words() {
        assert_eq!(
            for_embedding("def getUserName(self_x):"),
            "def get user name(self x):"
        );
    }
}
