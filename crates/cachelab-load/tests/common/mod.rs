//! The workspace test harness with this crate's binaries, a bounded runner for
//! cachelab-load, and a validator for the subset of JSON Schema the report schema uses.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use cachelab_testkit::*;
use serde_json::Value;

/// No test run of the load generator may take longer than this.
pub const RUN_LIMIT: Duration = Duration::from_secs(30);

pub fn load_binary() -> &'static str {
    env!("CARGO_BIN_EXE_cachelab-load")
}

/// The proxy binary next to ours in `target/<profile>/` (built by `cargo test --workspace`).
pub fn proxy_binary() -> PathBuf {
    let path = Path::new(load_binary()).with_file_name("cachelab-proxy");
    assert!(
        path.exists(),
        "{} is missing: build it first (`cargo build -p cachelab-proxy`, or run `cargo test --workspace`)",
        path.display()
    );
    path
}

/// What one run of cachelab-load left behind.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The JSON report, if one was written.
    pub report: Option<Value>,
    pub elapsed: Duration,
}

impl Run {
    /// The report of a run that must have succeeded.
    pub fn ok(&self) -> &Value {
        assert_eq!(
            self.code,
            Some(0),
            "cachelab-load failed:\n{}\n{}",
            self.stdout,
            self.stderr
        );
        self.report.as_ref().expect("no JSON report")
    }
}

/// Runs cachelab-load with `args` against `server`, writing a JSON report; kills it (and
/// fails) if it outlives [`RUN_LIMIT`].
pub fn load(server: std::net::SocketAddr, args: &[&str]) -> Run {
    let ip = server.ip().to_string();
    let port = server.port().to_string();
    let mut all = vec!["-s", &ip, "-p", &port];
    all.extend_from_slice(args);
    load_with(&all)
}

/// Runs cachelab-load with exactly `args` (and a JSON report), as [`load`] does.
pub fn load_with(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let start = Instant::now();
    let mut child = Command::new(load_binary())
        .args(args)
        .arg("--json-out-file")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run cachelab-load");
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            panic!("cachelab-load {args:?} ran over {RUN_LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .map(|text| serde_json::from_str(&text).unwrap());
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        report,
        elapsed: start.elapsed(),
    }
}

/// A counter from the report, e.g. `u(&r, "/summary/get/ops")`.
pub fn u(report: &Value, pointer: &str) -> u64 {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no integer at {pointer}"))
}

pub fn f(report: &Value, pointer: &str) -> f64 {
    report
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer}"))
}

pub fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/load-report.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks `value` against `schema` (the keywords the report schema uses; any other
/// keyword is an error, so the validator cannot silently ignore a rule). Returns the
/// violations with their JSON pointers.
pub fn validate(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(rules) = schema.as_object() else {
        errors.push(format!("{at}: schema is not an object"));
        return;
    };
    for (keyword, rule) in rules {
        match keyword.as_str() {
            "$schema"
            | "$id"
            | "$defs"
            | "title"
            | "description"
            | "required"
            | "additionalProperties" => {}
            "$ref" => {
                let pointer = rule.as_str().unwrap().trim_start_matches('#');
                validate(
                    root,
                    root.pointer(pointer).expect("dangling $ref"),
                    value,
                    at,
                    errors,
                );
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                    _ => panic!("bad type rule"),
                };
                let fits = types.iter().any(|t| match *t {
                    "object" => value.is_object(),
                    "array" => value.is_array(),
                    "string" => value.is_string(),
                    "boolean" => value.is_boolean(),
                    "null" => value.is_null(),
                    "number" => value.is_number(),
                    "integer" => value.is_u64() || value.is_i64(),
                    other => panic!("unknown type {other}"),
                });
                if !fits {
                    errors.push(format!("{at}: {value} is not {types:?}"));
                }
            }
            "const" if value != rule => errors.push(format!("{at}: {value} is not {rule}")),
            "const" => {}
            "enum" if !rule.as_array().unwrap().contains(value) => {
                errors.push(format!("{at}: {value} is not one of {rule}"))
            }
            "enum" => {}
            "minimum" | "maximum" => {
                if let (Some(x), Some(bound)) = (value.as_f64(), rule.as_f64()) {
                    let ok = if keyword == "minimum" {
                        x >= bound
                    } else {
                        x <= bound
                    };
                    if !ok {
                        errors.push(format!("{at}: {x} breaks {keyword} {bound}"));
                    }
                }
            }
            "pattern" => {
                if let Some(text) = value.as_str() {
                    if !known_pattern(rule.as_str().unwrap(), text) {
                        errors.push(format!("{at}: {text:?} does not match {rule}"));
                    }
                }
            }
            "oneOf" => {
                let matching = rule
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| {
                        let mut e = Vec::new();
                        validate(root, s, value, at, &mut e);
                        e.is_empty()
                    })
                    .count();
                if matching != 1 {
                    errors.push(format!("{at}: matches {matching} of oneOf"));
                }
            }
            "properties" => {
                let Some(object) = value.as_object() else {
                    continue;
                };
                let properties = rule.as_object().unwrap();
                for name in rules
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !object.contains_key(name.as_str().unwrap()) {
                        errors.push(format!("{at}: missing {name}"));
                    }
                }
                for (name, item) in object {
                    match properties.get(name) {
                        Some(sub) => validate(root, sub, item, &format!("{at}/{name}"), errors),
                        None if rules.get("additionalProperties") == Some(&Value::Bool(false)) => {
                            errors.push(format!("{at}: undocumented field {name}"))
                        }
                        None => {}
                    }
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    validate(root, rule, item, &format!("{at}/{i}"), errors);
                }
            }
            other => errors.push(format!(
                "{at}: the test validator does not know keyword {other}"
            )),
        }
    }
}

/// The two patterns the schema uses, checked by hand (no regex engine in the tests).
fn known_pattern(pattern: &str, text: &str) -> bool {
    match pattern {
        "^[0-9]+:[0-9]+$" => text.split_once(':').is_some_and(|(a, b)| {
            [a, b]
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        }),
        "^[RGZSP]:[RGZSP]$" => {
            let b = text.as_bytes();
            b.len() == 3 && b[1] == b':' && [b[0], b[2]].iter().all(|c| b"RGZSP".contains(c))
        }
        other => panic!("the test validator does not know pattern {other}"),
    }
}

/// Validates a report against the schema file and panics with every violation.
pub fn assert_valid_report(report: &Value) {
    let schema = schema();
    let mut errors = Vec::new();
    validate(&schema, &schema, report, "", &mut errors);
    assert!(
        errors.is_empty(),
        "report breaks its schema:\n{}",
        errors.join("\n")
    );
}
