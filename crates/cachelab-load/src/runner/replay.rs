//! Opening a trace for replay: each thread reads the file itself, through the trace
//! reader, and shares one [`Feed`] among its connections.

use std::cell::RefCell;
use std::fs::File;
use std::rc::Rc;

use super::RunError;
use crate::config::{Config, Protocol, TraceReplay};
use crate::engine::replay::{Feed, Records, Spread};
use crate::trace::{open, ReadOptions, TraceError, TraceErrorKind};

/// The trace's records, read as they are needed.
pub fn records(trace: &TraceReplay, protocol: Protocol) -> Result<Records, RunError> {
    let file = File::open(&trace.path)
        .map_err(|e| refused(trace, TraceError::new(0, TraceErrorKind::Io(e))))?;
    let reader = open(file, ReadOptions::for_protocol(protocol)).map_err(|e| refused(trace, e))?;
    Ok(Box::new(reader))
}

pub fn refused(trace: &TraceReplay, error: TraceError) -> RunError {
    RunError::Trace {
        path: trace.path.display().to_string(),
        error,
    }
}

/// Thread `index`'s feed: its connections take the records of their clients.
pub fn feed(config: &Config, index: usize) -> Result<Option<Rc<RefCell<Feed>>>, RunError> {
    let Some(trace) = &config.trace else {
        return Ok(None);
    };
    let spread = Spread {
        total: config.connections(),
        first: index * config.clients,
    };
    let records = records(trace, config.workload.protocol)?;
    let feed = Feed::new(records, config.clients, spread, trace.speed > 0.0);
    Ok(Some(Rc::new(RefCell::new(feed))))
}
