//! `--print-percentiles`: which latency percentiles the human summary shows, in
//! memtier_benchmark's notation (`50,99,99.9`, its default; parsed as memtier's
//! `config_quantiles` does, with the range checked). Pure.

/// memtier's default list.
pub const DEFAULT_PERCENTILES: &str = "50,99,99.9";

/// A comma-separated list of percentiles, each in `[0, 100]`, in the order given.
pub fn parse(text: &str) -> Result<Vec<f64>, String> {
    text.split(',')
        .map(|p| {
            let value: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("{p:?} in {text:?} is not a number"))?;
            if (0.0..=100.0).contains(&value) {
                Ok(value)
            } else {
                Err(format!("{value} is not a percentile in [0, 100]"))
            }
        })
        .collect()
}

/// The column name of a percentile, as memtier writes it: `p50`, `p99.9`, `p99.99`
/// (at most three decimals, no trailing zeros).
pub fn label(percentile: f64) -> String {
    let text = format!("{percentile:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memtiers_default_list_parses_in_order() {
        assert_eq!(parse(DEFAULT_PERCENTILES).unwrap(), [50.0, 99.0, 99.9]);
        assert_eq!(parse("99.99, 0,100").unwrap(), [99.99, 0.0, 100.0]);
    }

    #[test]
    fn a_percentile_outside_0_to_100_or_not_a_number_is_refused() {
        for bad in ["", "50,", "101", "-1", "p99", "50;99", "NaN"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn labels_have_at_most_three_decimals_and_no_trailing_zeros() {
        let labels: Vec<String> = [50.0, 99.0, 99.9, 99.99, 99.999, 99.9999, 0.5]
            .into_iter()
            .map(label)
            .collect();
        assert_eq!(
            labels,
            ["p50", "p99", "p99.9", "p99.99", "p99.999", "p100", "p0.5"]
        );
    }
}
