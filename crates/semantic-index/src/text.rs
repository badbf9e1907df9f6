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

/// A word as the file-name boost matches it: the endings that turn one word of a subject into
/// another cut (`quantize`, `quantized` and `quantization` → `quant`; `tokenizer` and
/// `tokenization` → `token`; `logging` and `logger` → `log`), so that a question's verb meets the
/// file named by its noun. Both the file's words and the query's terms take this form. BM25 keeps
/// the lighter [`sub_tokens`] stem: with this one on every term, semble's questions scored lower
/// (docs/semantic-design.md, "File names and the path prior").
pub(crate) fn name_stem(word: &str) -> String {
    // Longer endings first wherever one ends another.
    const ENDINGS: [&str; 25] = [
        "izations", "ization", "isation", "ations", "ation", "izers", "izer", "ized", "izes",
        "ize", "ings", "ing", "ers", "er", "ed", "ions", "ion", "ences", "ence", "ities", "ity",
        "ies", "es", "s", "e",
    ];
    // An `s` is a plural's, not the end of `class`, `status` or `analysis`.
    let plural = |e: &str| e != "s" || !["ss", "us", "is"].iter().any(|x| word.ends_with(x));
    let cut = ENDINGS
        .iter()
        .filter(|e| plural(e))
        .find_map(|e| word.strip_suffix(e).filter(|s| s.chars().count() >= 3))
        .unwrap_or(word);
    // A doubled final consonant is one (`mapping` → `mapp` → `map`), except the `l`, `s` and `z`
    // that English doubles in the stem itself (`distill`, `class`, `buzz`).
    match cut.as_bytes() {
        [.., a, b]
            if a == b
                && a.is_ascii_alphabetic()
                && !matches!(a, b'a' | b'e' | b'i' | b'o' | b'u' | b'l' | b's' | b'z')
                && cut.chars().count() > 3 =>
        {
            cut[..cut.len() - 1].to_owned()
        }
        _ => cut.to_owned(),
    }
}

/// The query's terms the file-name boost matches: each [`name_stem`]med, without the words
/// that say nothing about a subject (`how`, `the`, `for`, …), which no file is named after and
/// which would otherwise dilute the share of a question's words a file's name holds.
pub(crate) fn name_terms(terms: &[String]) -> Vec<String> {
    const STOPWORDS: [&str; 40] = [
        "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have",
        "how", "if", "in", "into", "is", "it", "its", "not", "of", "on", "or", "that", "the",
        "their", "this", "to", "was", "what", "when", "where", "which", "who", "why", "with",
        "used", "using", "via",
    ];
    let mut out: Vec<String> = terms
        .iter()
        .filter(|t| !STOPWORDS.contains(&t.as_str()))
        .map(|t| name_stem(t))
        .collect();
    out.sort();
    out.dedup();
    out
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
    fn name_stems_meet_across_the_forms_of_a_word() {
        let check = |words: &[&str], stem: &str| {
            for w in words {
                assert_eq!(name_stem(w), stem, "{w}");
            }
        };
        check(
            &["quantize", "quantized", "quantization", "quantizer"],
            "quant",
        );
        check(&["tokenizer", "tokenization", "tokenize", "token"], "token");
        check(&["logging", "logger", "log"], "log");
        check(&["mapping", "map", "mapped"], "map");
        check(&["distill", "distillation", "distilled"], "distill");
        check(&["parse", "parser", "parsing"], "pars");
        check(&["route", "router", "routing"], "rout");
        // Short words keep what would leave fewer than three letters.
        check(&["is"], "is");
        check(&["use"], "use");
        check(&["class"], "class");
        check(&["bus", "buses"], "bus");
        check(&["status"], "status");
        check(&[""], "");
    }

    #[test]
    fn name_terms_are_a_questions_subject_words_stemmed() {
        let check = |query: &str, expected: &[&str]| {
            assert_eq!(name_terms(&sub_tokens(query)), expected, "{query}");
        };
        check("how the weights are quantized", &["quant", "weight"]);
        check("Where is the tokenizer used?", &["token"]);
        check("how is it done", &["don"]);
        check("", &[]);
    }

    #[test]
    fn embedding_text_spells_identifiers_as_words() {
        assert_eq!(
            for_embedding("def getUserName(self_x):"),
            "def get user name(self x):"
        );
    }
}
