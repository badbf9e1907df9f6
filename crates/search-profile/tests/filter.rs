//! The filtered selection equals `rg --files` with the same flags, and [`PathFilter`] agrees with
//! the walk on every file: a backend filtering the paths it holds selects what the walk selects.

use std::collections::BTreeSet;

use index_contract::{FileFilter, SearchMode, SearchRequest};
use index_testkit::rg::rg_command;
use index_testkit::tree::{generated_tree, write};
use search_profile::{PathFilter, Selection};

fn filter(globs: &[&str], types: &[&str], hidden: bool, ignored: bool) -> FileFilter {
    FileFilter {
        globs: globs.iter().map(|g| g.to_string()).collect(),
        types: types.iter().map(|t| t.to_string()).collect(),
        include_hidden: hidden,
        include_ignored: ignored,
    }
}

/// `rg --files` with `files`' flags, without git's internals (which the walk never enters).
fn rg_files(root: &std::path::Path, files: &FileFilter) -> BTreeSet<String> {
    let mut request = SearchRequest::new("", SearchMode::Literal);
    request.files = files.clone();
    let out = rg_command(root, &request)
        .arg("--files")
        .output()
        .expect("rg");
    assert!(out.status.code().is_some_and(|c| c <= 1));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|p| !p.split('/').any(index_guard::is_git_internal_segment))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_filtered_walk_is_rgs_and_path_filter_agrees_with_it() {
    let (tree, _outside) = generated_tree(5);
    let root = tree.path();
    write(root, ".env.rs", b"hidden, named by a glob\n");
    write(root, "build/gen.rs", b"ignored\n");
    write(root, "src/.cache/x.txt", b"hidden directory\n");
    let default: BTreeSet<String> = Selection::new(root).files().into_iter().collect();
    let filters = [
        filter(&["*.rs"], &[], false, false),
        filter(&["!src/**", "*.txt"], &[], false, false),
        filter(&["*.log", "!keep.log"], &[], false, false),
        filter(&["!*.md"], &[], false, false),
        filter(&[], &["rust"], false, false),
        filter(&["!docs/**"], &["txt", "markdown"], false, false),
        filter(&["src/*"], &["rust"], false, false),
        // ripgrep's built-in `all`: any file of a defined type.
        filter(&[], &["all"], false, false),
        filter(&["!*.md"], &["all"], true, false),
        filter(&["!*.tmp"], &[], true, false),
        filter(&[], &["rust"], false, true),
        filter(&["*.rs"], &[], true, true),
        filter(&[], &[], true, false),
        filter(&[], &[], false, true),
        // A glob naming a directory: as an include it names no file (so selects nothing); as an
        // exclude it prunes the directory.
        filter(&["src"], &[], false, false),
        filter(&["!src"], &[], false, false),
        filter(&["inner", "*.md"], &[], false, false),
    ];
    let mut selected = 0;
    for files in &filters {
        let walked: BTreeSet<String> = Selection::new(root)
            .filter(files)
            .unwrap()
            .files()
            .into_iter()
            .collect();
        assert_eq!(walked, rg_files(root, files), "{files:?}");
        selected += walked.len();
        let paths = PathFilter::new(files).unwrap();
        // Every file the walk selects passes the path filter...
        for f in &walked {
            assert!(
                paths.matches(f),
                "{files:?}: the walk selects {f}, the filter refuses it"
            );
        }
        // ...and of the default selection, exactly those do: widening the walk only adds files.
        // Except one narrowing: `--no-ignore` drops the ignore rules that whitelist hidden names
        // (`!.conf/` after `.*`), so without `--hidden` it skips what they let in.
        for f in &default {
            if files.include_ignored
                && !files.include_hidden
                && search_profile::has_hidden_component(f)
            {
                continue;
            }
            assert_eq!(paths.matches(f), walked.contains(f), "{files:?}: {f}");
        }
    }
    assert!(selected > 300, "only {selected} files compared");
}
