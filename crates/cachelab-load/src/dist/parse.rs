//! The text syntax of a distribution, shared by the command line and the experiment
//! files: `NAME:KEY=VALUE,KEY=VALUE`, a bare number (fixed), a built-in name, or
//! `file:PATH`. Every error is one line naming the parameter at fault.
//!
//! | syntax | distribution |
//! |---|---|
//! | `100`, `fixed:100`, `fixed:value=100` | always 100 |
//! | `uniform:min=A,max=B` | continuous uniform on [A, B] |
//! | `normal:mean=M,sd=S` | normal |
//! | `exponential:mean=M` or `exponential:rate=L` | exponential |
//! | `pareto:scale=XM,shape=A` | Pareto type I, x >= XM |
//! | `gpareto:loc=U,scale=S,shape=K` | generalized Pareto |
//! | `gev:loc=U,scale=S,shape=K` | generalized extreme value |
//! | `discrete:V1=W1,V2=W2,...` | V1 with weight W1, ... |
//! | `file:PATH` | an empirical table ([`super::empirical`]) |
//! | `fb_key`, `fb_value`, `fb_ia`, `kvcache_reg_value`, `kvcache_reg_popularity` | built in ([`super::builtin`]) |

use std::sync::Arc;

use thiserror::Error;

use super::{builtin, Dist, Empirical};

/// A distribution that cannot be built, in one line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct DistError(pub String);

/// The families and the parameters each takes, for the error that lists them.
const FAMILIES: &str =
    "fixed, uniform, normal, exponential, pareto, gpareto, gev, discrete, file, or a built-in (fb_key, fb_value, fb_ia, kvcache_reg_value, kvcache_reg_popularity)";

/// Parses `text` in the syntax above.
pub fn parse(text: &str) -> Result<Dist, DistError> {
    let text = text.trim();
    if let Ok(v) = text.parse::<f64>() {
        return finite("fixed", "value", v).map(Dist::Fixed);
    }
    if let Some(dist) = builtin::named(text) {
        return Ok(dist);
    }
    let Some((family, rest)) = text.split_once(':') else {
        return Err(DistError(format!(
            "{text:?} is not a distribution: expected NAME:KEY=VALUE,... with NAME one of {FAMILIES}"
        )));
    };
    let family = family.trim();
    match family {
        "file" => {
            let path = rest.trim();
            if path.is_empty() {
                return Err(DistError("file: missing PATH (file:PATH)".into()));
            }
            return Ok(Dist::Empirical(Arc::new(Empirical::from_file(path)?)));
        }
        "discrete" => return discrete(rest),
        "fixed" if !rest.contains('=') => {
            let v = rest
                .trim()
                .parse::<f64>()
                .map_err(|_| DistError(format!("fixed: {:?} is not a number", rest.trim())))?;
            return finite("fixed", "value", v).map(Dist::Fixed);
        }
        _ => {}
    }
    let allowed: &[&str] = match family {
        "fixed" => &["value"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "sd"],
        "exponential" => &["mean", "rate"],
        "pareto" => &["scale", "shape"],
        "gpareto" | "gev" => &["loc", "scale", "shape"],
        other => {
            return Err(DistError(format!(
                "{other:?} is not a distribution: expected one of {FAMILIES}"
            )))
        }
    };
    let mut p = Params::new(family, rest, allowed)?;
    let dist = match family {
        "fixed" => Dist::Fixed(p.take("value")?),
        "uniform" => {
            let (min, max) = (p.take("min")?, p.take("max")?);
            if min > max {
                return Err(DistError(format!("uniform: min={min} is above max={max}")));
            }
            Dist::Uniform { min, max }
        }
        "normal" => Dist::Normal {
            mean: p.take("mean")?,
            sd: positive(family, "sd", p.take("sd")?)?,
        },
        "exponential" => {
            let mean = match (p.maybe("mean")?, p.maybe("rate")?) {
                (Some(mean), None) => positive(family, "mean", mean)?,
                (None, Some(rate)) => 1.0 / positive(family, "rate", rate)?,
                _ => {
                    return Err(DistError(
                        "exponential: give exactly one of mean= and rate=".into(),
                    ))
                }
            };
            Dist::Exponential { mean }
        }
        "pareto" => Dist::Pareto {
            scale: positive(family, "scale", p.take("scale")?)?,
            shape: positive(family, "shape", p.take("shape")?)?,
        },
        "gpareto" | "gev" => {
            let loc = p.take("loc")?;
            let scale = positive(family, "scale", p.take("scale")?)?;
            let shape = p.take("shape")?;
            if family == "gev" {
                Dist::Gev { loc, scale, shape }
            } else {
                Dist::GPareto { loc, scale, shape }
            }
        }
        _ => unreachable!("families without parameters are matched above"),
    };
    Ok(dist)
}

fn finite(family: &str, key: &str, v: f64) -> Result<f64, DistError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(DistError(format!(
            "{family}: {key}={v} is not a finite number"
        )))
    }
}

fn positive(family: &str, key: &str, v: f64) -> Result<f64, DistError> {
    if v > 0.0 {
        Ok(v)
    } else {
        Err(DistError(format!("{family}: {key}={v} must be positive")))
    }
}

/// `V1=W1,V2=W2,...`: values with weights.
fn discrete(rest: &str) -> Result<Dist, DistError> {
    let pairs = rest
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| {
            let (v, w) = pair.split_once('=').ok_or_else(|| {
                DistError(format!("discrete: {:?} is not VALUE=WEIGHT", pair.trim()))
            })?;
            let number = |s: &str, what: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| {
                        DistError(format!(
                            "discrete: {what} {:?} is not a finite number",
                            s.trim()
                        ))
                    })
            };
            Ok((number(v, "value")?, number(w, "weight")?))
        })
        .collect::<Result<Vec<_>, DistError>>()?;
    Ok(Dist::Empirical(Arc::new(Empirical::discrete(
        pairs, "discrete",
    )?)))
}

/// `KEY=VALUE` pairs, each taken once.
struct Params<'a> {
    family: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Params<'a> {
    /// Refuses keys the family does not take, and keys given twice.
    fn new(family: &'a str, text: &'a str, allowed: &[&str]) -> Result<Params<'a>, DistError> {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| DistError(format!("{family}: {item:?} is not KEY=VALUE")))?;
            let k = k.trim();
            if !allowed.contains(&k) {
                return Err(DistError(format!(
                    "{family}: unknown parameter {k:?} (takes {})",
                    allowed.join(", ")
                )));
            }
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(DistError(format!("{family}: {k}= is given twice")));
            }
            pairs.push((k, v.trim()));
        }
        Ok(Params { family, pairs })
    }

    fn maybe(&mut self, key: &str) -> Result<Option<f64>, DistError> {
        let Some(i) = self.pairs.iter().position(|(k, _)| *k == key) else {
            return Ok(None);
        };
        let (_, text) = self.pairs.remove(i);
        let v = text
            .parse::<f64>()
            .map_err(|_| DistError(format!("{}: {key}={text:?} is not a number", self.family)))?;
        finite(self.family, key, v).map(Some)
    }

    fn take(&mut self, key: &str) -> Result<f64, DistError> {
        self.maybe(key)?
            .ok_or_else(|| DistError(format!("{}: missing {key}=", self.family)))
    }
}
