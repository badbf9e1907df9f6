//! Syntax-aware chunks: tree-sitter parses the file and the chunks follow its top-level items.
//!
//! The tree is first flattened into *pieces*, each starting at a line start and ending where the
//! next one starts, so that the pieces cover every byte exactly once:
//!
//! - every child of the root is a piece, unless it is bigger than [`TARGET_BYTES`]; such a node
//!   is split at its children, recursively (an `impl` at its methods, a class at its body's
//!   members), and a node without children (a long string or comment) between lines; the split
//!   node's header (`impl Parser {`, `class Point:`) stays with its first member;
//! - a comment, attribute or decorator that starts its line and is followed by its next sibling
//!   without a blank line in between is glued to that sibling, so a doc comment stays with its
//!   definition;
//! - a piece holding only unnamed tokens (a closing `}`, `};`) joins the piece before it.
//!
//! The pieces are then merged greedily up to [`TARGET_BYTES`], except that a definition of at
//! least [`ALONE_BYTES`] is a chunk of its own, a split definition starts a chunk, and any split
//! node ends one.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{Language, Node, ParseOptions, Parser};

use super::{TARGET_BYTES, line_starts};

/// Files bigger than this are chunked by lines without being parsed: a deterministic bound on
/// the parser's time and memory (a generated or minified file gains nothing from a syntax tree).
pub const MAX_PARSE_BYTES: usize = 1 << 20;

/// The parse is abandoned (and the file chunked by lines) after this long. It is a safety net
/// against a pathological input, far above the few milliseconds a 1 MiB file takes, so that the
/// chunks of a file do not depend on the machine's load in practice.
const PARSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A definition at least this big is a chunk of its own; smaller ones merge with their
/// neighbours, so that twenty one-line getters make one chunk rather than twenty.
pub const ALONE_BYTES: usize = TARGET_BYTES / 4;

/// How deep splitting may descend before the rest of a node is cut between lines; it bounds the
/// recursion on pathologically nested input.
const MAX_DEPTH: usize = 48;

/// When the parser's `ERROR` nodes hold more than this share of the file, the tree says too
/// little and the file is chunked by lines. (Counting the top-level items that hold an error
/// instead would drop every C header with one unparsed macro: its include guard holds it all.)
const MAX_ERROR_SHARE: f64 = 0.25;

/// Node kinds that define something named (by a `name` field, or a `declarator` chain in the C
/// family). One list serves every grammar: the kinds do not clash across them.
const DEFINITION_KINDS: &[&str] = &[
    // Rust.
    "function_item",
    "function_signature_item",
    "struct_item",
    "enum_item",
    "union_item",
    "trait_item",
    "mod_item",
    "type_item",
    "const_item",
    "static_item",
    "macro_definition",
    // Python, C and C++ (function_definition), Python.
    "function_definition",
    "class_definition",
    // C and C++.
    "type_definition",
    "preproc_def",
    "preproc_function_def",
    "namespace_definition",
    "alias_declaration",
    // Go.
    "function_declaration",
    "method_declaration",
    "type_spec",
    "type_alias",
    // JavaScript and TypeScript.
    "generator_function_declaration",
    "class_declaration",
    "abstract_class_declaration",
    "method_definition",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "internal_module",
    "module",
    "function_signature",
    // Java.
    "record_declaration",
    "constructor_declaration",
    "annotation_type_declaration",
];

/// Type specifiers that define a name only when they have a body (`struct s { … }`, not
/// `struct s *p`).
const SPECIFIER_KINDS: &[&str] = &[
    "struct_specifier",
    "union_specifier",
    "enum_specifier",
    "class_specifier",
];

/// Nodes that wrap a definition with what belongs to it (decorators, `template <…>`, `export`).
const WRAPPER_KINDS: &[&str] = &[
    "decorated_definition",
    "template_declaration",
    "export_statement",
];

/// Values that make a variable a definition (`const parse = (x) => …`).
const FUNCTION_VALUE_KINDS: &[&str] = &[
    "arrow_function",
    "function_expression",
    "function",
    "generator_function",
    "class",
];

/// The grammar for a file, by its extension.
pub fn language_for(path: &str) -> Option<Language> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let (_, ext) = name.rsplit_once('.')?;
    let language = match ext.to_ascii_lowercase().as_str() {
        "rs" => tree_sitter_rust::LANGUAGE,
        "py" | "pyi" | "pyw" => tree_sitter_python::LANGUAGE,
        "c" | "h" => tree_sitter_c::LANGUAGE,
        "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" | "ipp" | "tpp" => {
            tree_sitter_cpp::LANGUAGE
        }
        "go" => tree_sitter_go::LANGUAGE,
        "js" | "mjs" | "cjs" | "jsx" => tree_sitter_javascript::LANGUAGE,
        "ts" | "mts" | "cts" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX,
        "java" => tree_sitter_java::LANGUAGE,
        _ => return None,
    };
    Some(language.into())
}

/// One chunk's byte range and the names it defines.
#[derive(Debug)]
pub struct Span {
    /// The first byte, at a line start.
    pub start: usize,
    /// One past the last byte: the next span's start, or the file's end.
    pub end: usize,
    /// The names of the definitions it holds, in order.
    pub names: Vec<String>,
}

/// The chunks of a file in a language [`language_for`] knows, as byte spans covering the whole
/// file; `None` when the file must be chunked by lines instead (no grammar, too big, the parse
/// timed out or the tree is mostly errors).
pub fn spans(path: &str, text: &str) -> Option<Vec<Span>> {
    let language = language_for(path)?;
    if text.len() > MAX_PARSE_BYTES || text.trim().is_empty() {
        return None;
    }
    let mut parser = Parser::new();
    parser.set_language(&language).ok()?;
    let deadline = Instant::now() + PARSE_TIMEOUT;
    let mut progress = |_: &tree_sitter::ParseState| {
        if Instant::now() > deadline {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let bytes = text.as_bytes();
    let tree = parser.parse_with_options(
        &mut |i, _| bytes.get(i..).unwrap_or_default(),
        None,
        Some(ParseOptions::new().progress_callback(&mut progress)),
    )?;
    let root = tree.root_node();
    if root.is_error() || error_bytes(root) as f64 > MAX_ERROR_SHARE * text.len() as f64 {
        return None;
    }
    let mut pieces = Pieces {
        text,
        line_starts: line_starts(text),
        out: Vec::new(),
        break_here: false,
        break_next: false,
        covered: 0,
    };
    pieces.children(root, 0);
    if pieces.out.is_empty() {
        return None;
    }
    Some(merge(text, pieces.out))
}

/// The bytes under `ERROR` nodes (the outermost ones) in `root`'s tree.
fn error_bytes(root: Node) -> usize {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() {
            total += node.byte_range().len();
        } else if node.has_error() {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    total
}

/// A run of lines that chunking never cuts: it starts at a line start and ends where the next
/// piece starts.
#[derive(Debug)]
struct Piece {
    start: usize,
    names: Vec<String>,
    definition: bool,
    /// Whether it joins the piece after it (a leading comment or attribute).
    glue_next: bool,
    /// Whether it must start a new chunk.
    break_before: bool,
    /// Whether it holds only unnamed tokens (a closing `}`): it joins the piece before it.
    trivial: bool,
}

/// The flattening of a tree into pieces.
struct Pieces<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
    out: Vec<Piece>,
    /// Whether the piece that holds the next pushed byte must start a chunk (a split definition
    /// starts there).
    break_here: bool,
    /// Whether the next new piece must start a chunk (a split node ended before it).
    break_next: bool,
    /// The end of the last node pushed: a piece never starts before it.
    covered: usize,
}

impl Pieces<'_> {
    /// The start of the line holding byte `b`.
    fn line_start(&self, b: usize) -> usize {
        let i = self.line_starts.partition_point(|&s| s <= b);
        self.line_starts[i.saturating_sub(1)]
    }

    /// The first line start at or after byte `b` (the file's length if there is none).
    fn next_line_start(&self, b: usize) -> usize {
        let i = self.line_starts.partition_point(|&s| s < b);
        self.line_starts.get(i).copied().unwrap_or(self.text.len())
    }

    /// Adds a piece for the node at bytes `at..end`, starting at the line start before `at`; a
    /// node that starts on a line where the last one ends (`}  // end of namespace`) starts at
    /// the next line instead, and one that ends before that joins the last piece.
    /// `trivial` says whether the node is an unnamed token; `None` for a comment, which leaves
    /// a piece as trivial as it was (`}  // end of namespace` still closes).
    fn push(
        &mut self,
        at: usize,
        end: usize,
        names: Vec<String>,
        glue_next: bool,
        trivial: Option<bool>,
    ) {
        let line = self.line_start(at);
        let start = match self.out.last() {
            None => 0,
            Some(last) if line > last.start && line < self.covered => {
                self.next_line_start(self.covered)
            }
            // Never before the last piece, so that pieces stay in order.
            Some(last) => line.max(last.start),
        };
        self.covered = self.covered.max(end);
        let definition = !names.is_empty();
        if start >= end && start > 0 {
            if let Some(last) = self.out.last_mut() {
                last.names.extend(names);
                last.definition |= definition;
                last.trivial &= trivial.unwrap_or(true);
            }
            return;
        }
        let break_here = std::mem::take(&mut self.break_here);
        if let Some(last) = self.out.last_mut().filter(|l| l.start == start) {
            last.names.extend(names);
            last.definition |= definition;
            last.glue_next = glue_next;
            last.break_before |= break_here;
            last.trivial &= trivial.unwrap_or(true);
            return;
        }
        let break_before = break_here | std::mem::take(&mut self.break_next);
        self.out.push(Piece {
            start,
            names,
            definition,
            glue_next,
            break_before,
            trivial: trivial.unwrap_or(false),
        });
    }

    /// The children of `node`, each a piece or split further.
    fn children(&mut self, node: Node, depth: usize) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        let bytes = self.text.as_bytes();
        for (i, &kid) in kids.iter().enumerate() {
            let glue = is_prefix(kid)
                && kids.get(i + 1).is_some_and(|next| {
                    let between = bytes.get(kid.end_byte()..next.start_byte()).unwrap_or(&[]);
                    let before = &bytes[self.line_start(kid.start_byte())..kid.start_byte()];
                    between.iter().filter(|&&b| b == b'\n').count() < 2
                        && before.iter().all(u8::is_ascii_whitespace)
                });
            self.node(kid, depth, glue);
        }
    }

    /// One node: a piece if it fits in [`TARGET_BYTES`], else split at its children or between
    /// lines; a split definition starts a chunk, and a split node ends one.
    fn node(&mut self, node: Node, depth: usize, glue_next: bool) {
        if node.byte_range().len() <= TARGET_BYTES {
            let names = all_names(node, self.text);
            let trivial = (!node.kind().contains("comment")).then_some(!node.is_named());
            self.push(
                node.start_byte(),
                node.end_byte(),
                names,
                glue_next,
                trivial,
            );
            return;
        }
        let name = own_name(node, self.text);
        // A definition inside a wrapper (a decorated function, a template class) breaks where
        // the wrapper does, so that its decorators or `template <…>` line stay with it.
        let in_wrapper = node
            .parent()
            .is_some_and(|p| WRAPPER_KINDS.contains(&p.kind()));
        self.break_here |= (name.is_some() || WRAPPER_KINDS.contains(&node.kind())) && !in_wrapper;
        if depth >= MAX_DEPTH || node.child_count() == 0 {
            self.lines(node);
        } else {
            self.children(node, depth + 1);
        }
        self.covered = self.covered.max(node.end_byte());
        // The piece holding the node's first line (its header: `impl Parser {`, `class Foo:`)
        // names it; cut between lines, it holds every name the node defines.
        let head = self.line_start(node.start_byte());
        let names = if depth >= MAX_DEPTH || node.child_count() == 0 {
            all_names(node, self.text)
        } else {
            name.into_iter().collect()
        };
        if let Some(i) = self.out.iter().rposition(|p| p.start <= head) {
            if !names.is_empty() {
                self.out[i].names.splice(0..0, names);
                self.out[i].definition = true;
            }
            // The header joins the first piece of the body, unless it is big itself (the first
            // lines of a long string).
            let header = self
                .out
                .get(i + 1)
                .map(|next| next.start - self.out[i].start);
            self.out[i].glue_next |= header.is_some_and(|h| h < ALONE_BYTES)
                && depth < MAX_DEPTH
                && node.child_count() > 0;
        }
        self.break_next = true;
    }

    /// A node with no children worth splitting at, cut between lines into pieces of at most
    /// [`TARGET_BYTES`] (a single longer line stays whole).
    fn lines(&mut self, node: Node) {
        self.push(
            node.start_byte(),
            node.start_byte() + 1,
            Vec::new(),
            false,
            Some(false),
        );
        let mut piece_start = self.line_start(node.start_byte());
        let mut pos = piece_start;
        while pos < node.end_byte() {
            let next = self.text[pos..]
                .find('\n')
                .map_or(self.text.len(), |i| pos + i + 1);
            if pos > piece_start && next - piece_start > TARGET_BYTES {
                self.break_next = true;
                self.push(pos, pos + 1, Vec::new(), false, Some(false));
                piece_start = pos;
            }
            pos = next;
        }
    }
}

/// Comments and attributes: what describes the item after it.
fn is_prefix(node: Node) -> bool {
    let kind = node.kind();
    kind.contains("comment")
        || kind == "attribute_item"
        || kind == "attribute_declaration"
        || kind == "decorator"
}

/// The name `node` defines, if it is a definition.
fn own_name(node: Node, text: &str) -> Option<String> {
    let kind = node.kind();
    let name_node = if kind == "impl_item" {
        node.child_by_field_name("type")
    } else if DEFINITION_KINDS.contains(&kind)
        || (SPECIFIER_KINDS.contains(&kind) && node.child_by_field_name("body").is_some())
    {
        named(node)
    } else if kind == "variable_declarator" {
        node.child_by_field_name("value")
            .filter(|v| FUNCTION_VALUE_KINDS.contains(&v.kind()))
            .and_then(|_| node.child_by_field_name("name"))
    } else {
        None
    }?;
    let text = text.get(name_node.byte_range())?;
    // `Parser<'a, T>` names `Parser`, `Shape<int>::area` names `Shape::area`.
    let mut name = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => name.push(c),
            _ => {}
        }
    }
    (!name.is_empty() && name.len() <= 200 && !name.contains(char::is_whitespace)).then_some(name)
}

/// The node holding a definition's name: its `name` field, or the end of its `declarator`
/// chain (`char *parse(int)` → `parse`).
fn named(node: Node) -> Option<Node> {
    if let Some(name) = node.child_by_field_name("name") {
        return Some(name);
    }
    let mut current = node.child_by_field_name("declarator")?;
    for _ in 0..16 {
        match current.child_by_field_name("declarator") {
            Some(inner) => current = inner,
            None => return Some(current),
        }
    }
    None
}

/// The names of every definition in `node`'s subtree, in source order.
fn all_names(node: Node, text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor = node.walk();
    loop {
        if let Some(name) = own_name(cursor.node(), text) {
            names.push(name);
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.node() == node {
                return names;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return names;
            }
        }
    }
}

/// Glues, absorbs punctuation-only pieces and merges pieces greedily into spans.
fn merge(text: &str, pieces: Vec<Piece>) -> Vec<Span> {
    let ends: Vec<usize> = pieces
        .iter()
        .skip(1)
        .map(|p| p.start)
        .chain([text.len()])
        .collect();
    // Leading comments and attributes join what follows them.
    let mut glued: Vec<(Piece, usize)> = Vec::new();
    let mut carry: Option<(Piece, usize)> = None;
    for (p, end) in pieces.into_iter().zip(ends) {
        let (mut p, end) = match carry.take() {
            Some((mut c, _)) => {
                c.names.extend(p.names);
                c.definition |= p.definition;
                c.break_before |= p.break_before;
                c.glue_next = p.glue_next;
                c.trivial &= p.trivial;
                (c, end)
            }
            None => (p, end),
        };
        if p.glue_next {
            p.glue_next = false;
            carry = Some((p, end));
            continue;
        }
        // A closing brace alone joins the piece before it, whatever the rules below say.
        if p.trivial
            && let Some(last) = glued.last_mut()
        {
            last.1 = end;
            continue;
        }
        glued.push((p, end));
    }
    glued.extend(carry);
    let mut spans: Vec<Span> = Vec::new();
    let mut last_alone = false;
    for (p, end) in glued {
        let len = end - p.start;
        let alone = p.definition && len >= ALONE_BYTES;
        match spans.last_mut() {
            Some(s)
                if !p.break_before && !alone && !last_alone && end - s.start <= TARGET_BYTES =>
            {
                s.end = end;
                s.names.extend(p.names);
            }
            _ => spans.push(Span {
                start: p.start,
                end,
                names: p.names,
            }),
        }
        last_alone = alone;
    }
    spans
}
