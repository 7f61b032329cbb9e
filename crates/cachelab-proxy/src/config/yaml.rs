//! A nutcracker.yml read into a YAML tree with its cost bounded by the file's size.
//!
//! yaml-rust2's `YamlLoader` expands every alias by copying the anchored node, so a few
//! hundred bytes of nested aliases (a "billion laughs") become gigabytes and minutes of
//! work before anything can look at the result. nutcracker.yml files need no aliases, so
//! this builds the tree from the parser's events itself and refuses the first alias it
//! meets: every node then comes from bytes of the file, and the work and memory are
//! linear in its size. Nesting is bounded too, because dropping a tree is recursive and
//! a file of `- - - - ...` would otherwise overflow the stack (a nutcracker.yml nests
//! three levels deep).

use thiserror::Error;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};
use yaml_rust2::yaml::Hash;
use yaml_rust2::Yaml;

/// Deepest nesting of sequences and mappings accepted (a nutcracker.yml has three:
/// pools, a pool's keys, its server list).
pub const MAX_DEPTH: usize = 32;

/// Why a YAML text was refused; the position is the file's line and column (from 1).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum YamlError {
    #[error("not YAML: {0}")]
    Syntax(String),
    #[error(
        "line {line} column {column}: YAML aliases (*name) are not supported in a config \
         file; write the value out"
    )]
    Alias { line: usize, column: usize },
    #[error("line {line} column {column}: nested deeper than {MAX_DEPTH} levels")]
    TooDeep { line: usize, column: usize },
    #[error("line {line} column {column}: duplicate key {key}")]
    DuplicateKey {
        line: usize,
        column: usize,
        key: String,
    },
}

impl YamlError {
    fn at(mark: Marker, make: impl FnOnce(usize, usize) -> YamlError) -> YamlError {
        make(mark.line(), mark.col() + 1)
    }
}

/// A node being built: a sequence, or a mapping with the key awaiting its value.
enum Open {
    Sequence(Vec<Yaml>),
    Mapping(Hash, Option<Yaml>),
}

/// The documents of `text`, with scalars typed as `YamlLoader` types them (tags aside:
/// the config reader converts every scalar it reads anyway).
pub fn load(text: &str) -> Result<Vec<Yaml>, YamlError> {
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| YamlError::Syntax(e.to_string()))?;
        let node = match event {
            Event::StreamEnd => return Ok(docs),
            Event::Alias(_) => {
                return Err(YamlError::at(mark, |line, column| YamlError::Alias {
                    line,
                    column,
                }))
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(YamlError::at(mark, |line, column| YamlError::TooDeep {
                        line,
                        column,
                    }));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Open::Sequence(Vec::new())
                } else {
                    Open::Mapping(Hash::new(), None)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Sequence(items)) => Yaml::Array(items),
                Some(Open::Mapping(map, _)) => Yaml::Hash(map),
                None => return Err(YamlError::Syntax("unbalanced collection".into())),
            },
            Event::Scalar(value, style, ..) => {
                if style == TScalarStyle::Plain {
                    Yaml::from_str(&value)
                } else {
                    Yaml::String(value)
                }
            }
            Event::StreamStart | Event::DocumentStart | Event::DocumentEnd | Event::Nothing => {
                continue
            }
        };
        match stack.last_mut() {
            None => docs.push(node),
            Some(Open::Sequence(items)) => items.push(node),
            Some(Open::Mapping(_, key @ None)) => *key = Some(node),
            Some(Open::Mapping(map, key)) => {
                let key = key.take().expect("matched Some above");
                if map.contains_key(&key) {
                    return Err(YamlError::at(mark, |line, column| {
                        YamlError::DuplicateKey {
                            line,
                            column,
                            key: describe(&key),
                        }
                    }));
                }
                map.insert(key, node);
            }
        }
    }
}

/// A key as the error names it: the scalar itself, or its kind.
fn describe(key: &Yaml) -> String {
    match key {
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".into(),
        _ => "(a collection)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nine levels of nine aliases: expanded, 9^9 (387 million) scalars.
    fn billion_laughs() -> String {
        let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (prev, name) in "abcdefgh".chars().zip("bcdefghi".chars()) {
            let refs = vec![format!("*{prev}"); 9].join(",");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        text
    }

    #[test]
    fn an_alias_bomb_is_refused_at_its_first_alias() {
        let err = load(&billion_laughs()).unwrap_err();
        assert_eq!(err, YamlError::Alias { line: 2, column: 8 });
        assert!(err.to_string().contains("YAML aliases"), "{err}");
    }

    #[test]
    fn a_single_alias_is_refused_too() {
        let err = load("a: &x 1\nb: *x\n").unwrap_err();
        assert_eq!(err, YamlError::Alias { line: 2, column: 4 });
    }

    #[test]
    fn anchors_without_aliases_change_nothing() {
        let docs = load("a: &x [1, two]\n").unwrap();
        assert_eq!(docs.len(), 1);
        let a = &docs[0]["a"];
        assert_eq!(a[0], Yaml::Integer(1));
        assert_eq!(a[1], Yaml::String("two".into()));
    }

    #[test]
    fn scalars_are_typed_like_yaml_loaders() {
        let text = "n: 7\nb: true\nq: \"true\"\nr: 1.5\nlist: [x, 2]\nnested: {k: v}\n";
        assert_eq!(
            load(text).unwrap(),
            yaml_rust2::YamlLoader::load_from_str(text).unwrap()
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let deep = "- ".repeat(MAX_DEPTH + 1) + "x\n";
        let err = load(&deep).unwrap_err();
        assert!(matches!(err, YamlError::TooDeep { .. }), "{err}");
        let fits = "- ".repeat(MAX_DEPTH) + "x\n";
        assert!(load(&fits).is_ok());
    }

    #[test]
    fn a_duplicate_key_is_refused_with_its_name() {
        let err = load("a:\n  listen: x\n  listen: y\n").unwrap_err();
        assert!(
            matches!(&err, YamlError::DuplicateKey { line: 3, key, .. } if key == "\"listen\""),
            "{err}"
        );
    }

    #[test]
    fn documents_are_counted_and_syntax_errors_reported() {
        assert_eq!(load("a: 1\n---\nb: 2\n").unwrap().len(), 2);
        assert!(load("").unwrap().is_empty());
        let err = load("a: [1, 2\n").unwrap_err();
        assert!(matches!(err, YamlError::Syntax(_)), "{err}");
    }
}
