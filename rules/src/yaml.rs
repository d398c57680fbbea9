//! YAML loading with PyYAML `BaseLoader` semantics: every scalar is a
//! string (no numbers, booleans or nulls), which is how the official checker
//! reads rule files. Built on `yaml-rust2`'s event parser so that block
//! scalars (`>` folded, `|` literal) and quoting follow the YAML spec.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A scalar's text and its 1-based line.
    Scalar(String, usize),
    Seq(Vec<Node>, usize),
    /// Key/value pairs in document order (duplicates kept; see [`Node::get`]).
    Map(Vec<(Node, Node)>, usize),
}

impl Node {
    pub fn line(&self) -> usize {
        match self {
            Node::Scalar(_, l) | Node::Seq(_, l) | Node::Map(_, l) => *l,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// Mapping lookup by string key; the last duplicate wins, as in a
    /// Python dict built from the pairs.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(pairs, _) => pairs
                .iter()
                .rev()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The first key of a mapping (how the checker classifies records).
    pub fn first_key(&self) -> Option<&str> {
        match self {
            Node::Map(pairs, _) => pairs.first().and_then(|(k, _)| k.as_str()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub message: String,
    pub line: usize,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

enum Frame {
    Seq(Vec<Node>, usize, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize, usize),
}

/// The most nodes a document may build, aliases counted at the size of
/// what they copy: a rule file has a few thousand, a config a few dozen. A
/// 461-byte document of nested aliases (each a list of ten aliases to the
/// one before) would otherwise build billions.
pub const MAX_NODES: usize = 1_000_000;

/// The deepest nesting of lists and mappings a document may have (rule
/// files nest five deep); deeper documents are refused rather than built
/// and walked recursively.
pub const MAX_DEPTH: usize = 64;

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    docs: Vec<Node>,
    /// Each anchored node and its size in nodes.
    anchors: HashMap<usize, (Node, usize)>,
    /// Nodes built so far (an alias adds the size of what it copies).
    nodes: usize,
    /// Nodes built when each open list or mapping started.
    starts: Vec<usize>,
    error: Option<YamlError>,
}

impl Builder {
    /// Count `n` more nodes; false (and the error set) past [`MAX_NODES`].
    fn spend(&mut self, n: usize, line: usize) -> bool {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            self.error.get_or_insert(YamlError {
                message: format!(
                    "the document expands to more than {MAX_NODES} nodes (aliases copy what they name): refused"
                ),
                line,
            });
            return false;
        }
        true
    }

    fn push_node(&mut self, node: Node, anchor: usize, size: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(items, _, _)) => items.push(node),
            Some(Frame::Map(pairs, pending, _, _)) => match pending.take() {
                None => *pending = Some(node),
                Some(k) => pairs.push((k, node)),
            },
        }
    }
}

impl Builder {
    /// A list or mapping starts: one node, one level deeper.
    fn open(&mut self, line: usize) -> bool {
        if self.stack.len() >= MAX_DEPTH {
            self.error.get_or_insert(YamlError {
                message: format!("lists and mappings nest more than {MAX_DEPTH} deep: refused"),
                line,
            });
            return false;
        }
        if !self.spend(1, line) {
            return false;
        }
        self.starts.push(self.nodes);
        true
    }

    /// A list or mapping ends: its size in nodes (itself and everything in
    /// it).
    fn close(&mut self) -> usize {
        let start = self.starts.pop().unwrap_or(self.nodes);
        self.nodes - start + 1
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        if self.error.is_some() {
            // Refused: build nothing more (the parser still reads the text,
            // which is small).
            return;
        }
        match ev {
            Event::Scalar(text, _style, anchor, _tag) => {
                if self.spend(1, line) {
                    self.push_node(Node::Scalar(text, line), anchor, 1)
                }
            }
            Event::SequenceStart(anchor, _) => {
                if self.open(line) {
                    self.stack.push(Frame::Seq(Vec::new(), anchor, line))
                }
            }
            Event::MappingStart(anchor, _) => {
                if self.open(line) {
                    self.stack.push(Frame::Map(Vec::new(), None, anchor, line))
                }
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, anchor, l)) = self.stack.pop() {
                    let size = self.close();
                    self.push_node(Node::Seq(items, l), anchor, size);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(pairs, _, anchor, l)) = self.stack.pop() {
                    let size = self.close();
                    self.push_node(Node::Map(pairs, l), anchor, size);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some((n, size)) => {
                    if self.spend(size, line) {
                        self.push_node(n, 0, size)
                    }
                }
                None => {
                    self.error.get_or_insert(YamlError {
                        message: "alias to an unknown anchor".into(),
                        line,
                    });
                }
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// Load a single-document YAML text; `Ok(None)` for an empty document
/// (PyYAML returns `None` and the checker skips the file).
pub fn load(src: &str) -> Result<Option<Node>, YamlError> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(src);
    parser.load(&mut b, false).map_err(|e| YamlError {
        message: e.info().to_string(),
        line: e.marker().line(),
    })?;
    if let Some(e) = b.error {
        return Err(e);
    }
    Ok(b.docs.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_strings_with_python_visible_text() {
        let src = r#"
- BEGIN:
    CODE: >
        s.update({
            'a': False,
        })

- KEY:
    NAME:  submission_division
    REQ:   EXACTLY_ONE
    CHECK: " v['value'] in ['closed', 'open'] "
    POST: |
        s['x'] = 1
        if s['x'] == 1:
            s['y'] = 2
- KEY:
    NAME: n
    CHECK:
        - "'value' in v"
        - v['value'] > 0
    REQ: 12
"#;
        let doc = load(src).unwrap().unwrap();
        let Node::Seq(items, _) = &doc else {
            panic!("top level is a list")
        };
        assert_eq!(items.len(), 3);
        let code = items[0]
            .get("BEGIN")
            .unwrap()
            .get("CODE")
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!(code, "s.update({\n    'a': False,\n})\n");
        let key = items[1].get("KEY").unwrap();
        assert_eq!(
            key.get("CHECK").unwrap().as_str(),
            Some(" v['value'] in ['closed', 'open'] ")
        );
        assert_eq!(
            key.get("POST").unwrap().as_str(),
            Some("s['x'] = 1\nif s['x'] == 1:\n    s['y'] = 2\n")
        );
        let k3 = items[2].get("KEY").unwrap();
        assert!(matches!(k3.get("CHECK"), Some(Node::Seq(v, _)) if v.len() == 2));
        // BaseLoader: numbers stay strings.
        assert_eq!(k3.get("REQ").unwrap().as_str(), Some("12"));
        assert_eq!(items[1].first_key(), Some("KEY"));
        assert!(key.line() > 1);
    }

    #[test]
    fn empty_document_is_none() {
        assert_eq!(load("").unwrap(), None);
        assert_eq!(load("# only a comment\n").unwrap(), None);
    }

    /// The 461-byte "billion laughs": nine levels of ten aliases each.
    fn alias_bomb() -> String {
        let mut s = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for w in names.windows(2) {
            let (prev, name) = (w[0], w[1]);
            let refs = vec![format!("*{prev}"); 9].join(",");
            s.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        s
    }

    #[test]
    fn an_alias_bomb_is_refused_quickly_with_a_typed_error() {
        let bomb = alias_bomb();
        assert!(bomb.len() < 500, "{}", bomb.len());
        let t = std::time::Instant::now();
        let e = load(&bomb).unwrap_err();
        assert!(e.message.contains("more than 1000000 nodes"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        // A few aliases are fine, and count what they copy.
        let ok = load("a: &x [1, 2]\nb: *x\nc: *x\n").unwrap().unwrap();
        assert_eq!(ok.get("c"), ok.get("a"));
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let e = load(&deep).unwrap_err();
        assert!(e.message.contains("nest more than 64 deep"), "{e}");
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(load(&fine).is_ok());
    }

    #[test]
    fn syntax_errors_carry_a_line() {
        let e = load("- KEY:\n    NAME: [unclosed\n").unwrap_err();
        assert!(e.line >= 1);
    }
}
