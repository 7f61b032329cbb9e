//! The `--link NAME:A:B:DELAY_US[:DELAY_US_BA]` argument: one link of the process, its
//! two interfaces, and the one-way delay each way (the second defaults to the first).

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkArg {
    pub name: String,
    pub a: String,
    pub b: String,
    pub delay_us_ab: u64,
    pub delay_us_ba: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkArgError(String);

impl fmt::Display for LinkArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; expected NAME:IFACE_A:IFACE_B:DELAY_US[:DELAY_US_BA]",
            self.0
        )
    }
}

impl std::error::Error for LinkArgError {}

impl FromStr for LinkArg {
    type Err = LinkArgError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(':').collect();
        if !(4..=5).contains(&parts.len()) {
            return Err(LinkArgError(format!("{s:?} has {} fields", parts.len())));
        }
        if parts[..3].iter().any(|p| p.is_empty()) {
            return Err(LinkArgError(format!(
                "{s:?} has an empty name or interface"
            )));
        }
        if parts[1] == parts[2] {
            return Err(LinkArgError(format!(
                "{s:?} names the same interface twice"
            )));
        }
        let us = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| LinkArgError(format!("{p:?} is not a delay in microseconds")))
        };
        let delay_us_ab = us(parts[3])?;
        let delay_us_ba = parts.get(4).map_or(Ok(delay_us_ab), |p| us(p))?;
        Ok(LinkArg {
            name: parts[0].to_owned(),
            a: parts[1].to_owned(),
            b: parts[2].to_owned(),
            delay_us_ab,
            delay_us_ba,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_delay_serves_both_directions() {
        let l: LinkArg = "server1:h0a:h0b:450".parse().unwrap();
        assert_eq!(
            l,
            LinkArg {
                name: "server1".into(),
                a: "h0a".into(),
                b: "h0b".into(),
                delay_us_ab: 450,
                delay_us_ba: 450
            }
        );
    }

    #[test]
    fn a_second_delay_is_the_way_back() {
        let l: LinkArg = "x:a:b:10:2000".parse().unwrap();
        assert_eq!((l.delay_us_ab, l.delay_us_ba), (10, 2000));
    }

    #[test]
    fn malformed_links_are_refused_naming_the_problem() {
        for (arg, says) in [
            ("x:a:b", "3 fields"),
            ("x:a:a:5", "same interface"),
            ("x::b:5", "empty"),
            ("x:a:b:-1", "not a delay"),
            ("x:a:b:1:2:3", "6 fields"),
        ] {
            let e = arg.parse::<LinkArg>().unwrap_err().to_string();
            assert!(e.contains(says), "{arg}: {e}");
        }
    }
}
