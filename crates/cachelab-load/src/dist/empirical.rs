//! Empirical distributions: a table of values and weights from a file. Two shapes:
//! discrete (each value drawn with its weight's share) and piecewise-uniform (a range
//! drawn with its weight's share, then a point uniformly inside it).
//!
//! Files are read in one of three forms, told apart by their first character:
//! - rows of `VALUE WEIGHT` (whitespace or a comma between; `#` starts a comment): discrete;
//! - CacheLib cachebench's `sizes.json`: `valSizeRange` and `valSizeRangeProbability`
//!   (or `keySizeRange` and `keySizeRangeProbability`), discrete when the two lists are
//!   as long as each other, piecewise when the ranges have one bound more (cachebench's
//!   `WorkloadDistribution` reads them so);
//! - cachebench's `pop.json`: `popularityBuckets` (how many keys) and
//!   `popularityWeights` (each bucket's weight): piecewise over key ranks, bucket after
//!   bucket from rank 0, each key of a bucket equally likely.

use rand::{Rng, RngExt};
use serde_json::Value;

use super::DistError;

/// Files larger than this are refused before they are read.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct Empirical {
    /// Discrete: the values. Piecewise: the bounds, one more than the weights.
    points: Vec<f64>,
    /// Cumulative probabilities, ending at 1.
    cum: Vec<f64>,
    piecewise: bool,
}

fn bad(text: String) -> DistError {
    DistError(text)
}

impl Empirical {
    /// A discrete table; `what` names the source in errors.
    pub fn discrete(pairs: Vec<(f64, f64)>, what: &str) -> Result<Empirical, DistError> {
        let mut pairs = pairs;
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (points, weights): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        Ok(Empirical {
            cum: cumulative(&weights, what)?,
            points,
            piecewise: false,
        })
    }

    /// A piecewise-uniform table: `bounds` non-decreasing, one longer than `weights`.
    pub fn piecewise(
        bounds: Vec<f64>,
        weights: &[f64],
        what: &str,
    ) -> Result<Empirical, DistError> {
        if bounds.len() != weights.len() + 1 {
            return Err(bad(format!(
                "{what}: {} bounds for {} weights",
                bounds.len(),
                weights.len()
            )));
        }
        if let Some(i) = bounds
            .windows(2)
            .position(|w| w[0].partial_cmp(&w[1]).is_none_or(|o| o.is_gt()))
        {
            return Err(bad(format!(
                "{what}: bounds must not decrease ({} then {})",
                bounds[i],
                bounds[i + 1]
            )));
        }
        Ok(Empirical {
            cum: cumulative(weights, what)?,
            points: bounds,
            piecewise: true,
        })
    }

    /// The table in `path`, in any of the module's three forms.
    pub fn from_file(path: &str) -> Result<Empirical, DistError> {
        let what = format!("file {path}");
        let size = std::fs::metadata(path)
            .map_err(|e| bad(format!("{what}: {e}")))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(bad(format!(
                "{what}: {size} bytes, over the {MAX_FILE_BYTES} allowed"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("{what}: {e}")))?;
        Empirical::from_text(&text, &what)
    }

    /// The table in `text` (a file's contents), in any of the module's three forms.
    pub fn from_text(text: &str, what: &str) -> Result<Empirical, DistError> {
        if text.trim_start().starts_with('{') {
            from_json(text, what)
        } else {
            Empirical::discrete(parse_rows(text, what)?, what)
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let u: f64 = rng.random();
        let i = self
            .cum
            .partition_point(|c| *c <= u)
            .min(self.cum.len() - 1);
        if self.piecewise {
            let (lo, hi) = (self.points[i], self.points[i + 1]);
            lo + rng.random::<f64>() * (hi - lo)
        } else {
            self.points[i]
        }
    }

    fn probability(&self, i: usize) -> f64 {
        self.cum[i] - if i == 0 { 0.0 } else { self.cum[i - 1] }
    }

    pub fn cdf(&self, x: f64) -> f64 {
        if !self.piecewise {
            let n = self.points.partition_point(|v| *v <= x);
            return if n == 0 { 0.0 } else { self.cum[n - 1] };
        }
        let mut total = 0.0;
        for i in 0..self.cum.len() {
            let (lo, hi) = (self.points[i], self.points[i + 1]);
            let share = if x >= hi {
                1.0
            } else if x < lo {
                0.0
            } else {
                (x - lo) / (hi - lo)
            };
            total += self.probability(i) * share;
        }
        total
    }

    /// The mean and the second moment about 0.
    fn moments(&self) -> (f64, f64) {
        let (mut m1, mut m2) = (0.0, 0.0);
        for i in 0..self.cum.len() {
            let p = self.probability(i);
            if self.piecewise {
                let (a, b) = (self.points[i], self.points[i + 1]);
                m1 += p * (a + b) / 2.0;
                m2 += p * (a * a + a * b + b * b) / 3.0;
            } else {
                m1 += p * self.points[i];
                m2 += p * self.points[i] * self.points[i];
            }
        }
        (m1, m2)
    }

    pub fn mean(&self) -> f64 {
        self.moments().0
    }

    pub fn variance(&self) -> f64 {
        let (m1, m2) = self.moments();
        (m2 - m1 * m1).max(0.0)
    }

    /// The smallest and largest values with a positive weight.
    pub fn support(&self) -> (f64, f64) {
        let live: Vec<usize> = (0..self.cum.len())
            .filter(|i| self.probability(*i) > 0.0)
            .collect();
        let (first, last) = (live[0], *live.last().expect("some weight is positive"));
        if self.piecewise {
            (self.points[first], self.points[last + 1])
        } else {
            (self.points[first], self.points[last])
        }
    }
}

/// Cumulative shares of `weights`: each finite and not negative, some positive.
fn cumulative(weights: &[f64], what: &str) -> Result<Vec<f64>, DistError> {
    if weights.is_empty() {
        return Err(bad(format!("{what}: no values")));
    }
    if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
        return Err(bad(format!(
            "{what}: weight {w} must be a finite number >= 0"
        )));
    }
    let total: f64 = weights.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(bad(format!("{what}: every weight is 0")));
    }
    let mut sum = 0.0;
    let mut cum: Vec<f64> = weights
        .iter()
        .map(|w| {
            sum += w;
            sum / total
        })
        .collect();
    *cum.last_mut().expect("not empty") = 1.0;
    Ok(cum)
}

/// `VALUE WEIGHT` rows; errors name the line.
fn parse_rows(text: &str, what: &str) -> Result<Vec<(f64, f64)>, DistError> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|f| !f.is_empty())
            .collect();
        let number = |f: &str| f.parse::<f64>().ok().filter(|x| x.is_finite());
        match fields.as_slice() {
            [v, w] => match (number(v), number(w)) {
                (Some(v), Some(w)) if w >= 0.0 => rows.push((v, w)),
                (Some(_), Some(w)) => {
                    return Err(bad(format!(
                        "{what} line {}: weight {w} is negative",
                        n + 1
                    )))
                }
                _ => {
                    return Err(bad(format!(
                        "{what} line {}: {line:?} is not VALUE WEIGHT with finite numbers",
                        n + 1
                    )))
                }
            },
            _ => {
                return Err(bad(format!(
                    "{what} line {}: {line:?} is not VALUE WEIGHT",
                    n + 1
                )))
            }
        }
    }
    if rows.is_empty() {
        return Err(bad(format!("{what}: no VALUE WEIGHT rows")));
    }
    Ok(rows)
}

fn numbers(json: &Value, field: &str, what: &str) -> Result<Option<Vec<f64>>, DistError> {
    let Some(list) = json.get(field) else {
        return Ok(None);
    };
    let list = list
        .as_array()
        .ok_or_else(|| bad(format!("{what}: {field} is not a list")))?;
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(format!("{what}: {field}[{i}] is not a number")))
        })
        .collect::<Result<Vec<f64>, DistError>>()
        .map(Some)
}

/// cachebench's `sizes.json` or `pop.json`.
fn from_json(text: &str, what: &str) -> Result<Empirical, DistError> {
    let json: Value = serde_json::from_str(text)
        .map_err(|e| bad(format!("{what} line {}: not JSON ({e})", e.line())))?;
    if let Some(buckets) = numbers(&json, "popularityBuckets", what)? {
        let weights = numbers(&json, "popularityWeights", what)?.ok_or_else(|| {
            bad(format!(
                "{what}: popularityBuckets without popularityWeights"
            ))
        })?;
        if buckets.len() != weights.len() {
            return Err(bad(format!(
                "{what}: {} popularityBuckets for {} popularityWeights",
                buckets.len(),
                weights.len()
            )));
        }
        if let Some(b) = buckets.iter().find(|b| **b < 0.0) {
            return Err(bad(format!(
                "{what}: popularityBuckets holds {b}, not a count of keys"
            )));
        }
        let mut bounds = vec![0.0];
        for b in &buckets {
            bounds.push(bounds.last().expect("not empty") + b);
        }
        return Empirical::piecewise(bounds, &weights, what);
    }
    for (range, probability) in [
        ("valSizeRange", "valSizeRangeProbability"),
        ("keySizeRange", "keySizeRangeProbability"),
    ] {
        let Some(points) = numbers(&json, range, what)? else {
            continue;
        };
        let weights = numbers(&json, probability, what)?
            .ok_or_else(|| bad(format!("{what}: {range} without {probability}")))?;
        return if points.len() == weights.len() {
            Empirical::discrete(points.into_iter().zip(weights).collect(), what)
        } else if points.len() == weights.len() + 1 {
            Empirical::piecewise(points, &weights, what)
        } else {
            Err(bad(format!(
                "{what}: {} {range} for {} {probability}: need as many (discrete) or one more (ranges)",
                points.len(),
                weights.len()
            )))
        };
    }
    Err(bad(format!(
        "{what}: a JSON file needs valSizeRange and valSizeRangeProbability (cachebench's sizes.json) or popularityBuckets and popularityWeights (pop.json)"
    )))
}
