//! The result order shared by every searcher.

use std::cmp::Ordering;

/// A repo-relative path ordered component by component, the way a sorted tree walk lists files:
/// `a/b` comes before `a-b` because the directory `a` sorts before the name `a-b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathKey(pub String);

impl PathKey {
    /// Compares two repo-relative paths component by component.
    pub fn compare(a: &str, b: &str) -> Ordering {
        PathKey::compare_bytes(a.as_bytes(), b.as_bytes())
    }

    /// [`PathKey::compare`] on the paths' bytes.
    pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
        // The same order as comparing `a.split('/')` with `b.split('/')`, without splitting: at
        // the first differing byte, a `/` ends a component that the other path continues, so the
        // path holding it sorts first. Refreshes compare every path of the corpus this way.
        match a.iter().zip(b).position(|(x, y)| x != y) {
            None => a.len().cmp(&b.len()),
            Some(i) => match (a[i], b[i]) {
                (b'/', _) => Ordering::Less,
                (_, b'/') => Ordering::Greater,
                (x, y) => x.cmp(&y),
            },
        }
    }
}

impl Ord for PathKey {
    fn cmp(&self, other: &Self) -> Ordering {
        PathKey::compare(&self.0, &other.0)
    }
}

impl PartialOrd for PathKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::PathKey;

    #[test]
    fn directories_sort_before_names_that_extend_them() {
        let mut v = vec!["a-b", "a/b", "a", "a/a/z", "b"];
        v.sort_by(|a, b| PathKey::compare(a, b));
        assert_eq!(v, ["a", "a/a/z", "a/b", "a-b", "b"]);
    }

    #[test]
    fn the_order_is_the_component_by_component_order() {
        // Every pair of short paths over an alphabet with `/`, a byte below it and one above it.
        let alphabet = ["", "a", "b", "/", "-", ".", "é"];
        let mut paths = Vec::new();
        for x in alphabet {
            for y in alphabet {
                for z in alphabet {
                    paths.push(format!("{x}{y}{z}"));
                }
            }
        }
        for a in &paths {
            for b in &paths {
                assert_eq!(
                    PathKey::compare(a, b),
                    a.split('/').cmp(b.split('/')),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}
