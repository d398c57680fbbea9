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

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    docs: Vec<Node>,
    anchors: HashMap<usize, Node>,
    error: Option<YamlError>,
}

impl Builder {
    fn push_node(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
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

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(text, _style, anchor, _tag) => {
                self.push_node(Node::Scalar(text, line), anchor)
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq(Vec::new(), anchor, line))
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(Vec::new(), None, anchor, line))
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, anchor, l)) = self.stack.pop() {
                    self.push_node(Node::Seq(items, l), anchor);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(pairs, _, anchor, l)) = self.stack.pop() {
                    self.push_node(Node::Map(pairs, l), anchor);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(n) => self.push_node(n, 0),
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

    #[test]
    fn syntax_errors_carry_a_line() {
        let e = load("- KEY:\n    NAME: [unclosed\n").unwrap_err();
        assert!(e.line >= 1);
    }
}
