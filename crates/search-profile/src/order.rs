//! The result order shared by every searcher.

use std::cmp::Ordering;

/// A repo-relative path ordered component by component, the way a sorted tree walk lists files:
/// `a/b` comes before `a-b` because the directory `a` sorts before the name `a-b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathKey(pub String);

impl PathKey {
    /// Compares two repo-relative paths component by component.
    pub fn compare(a: &str, b: &str) -> Ordering {
        a.split('/').cmp(b.split('/'))
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
}
