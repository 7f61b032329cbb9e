//! A routed command made ready for the servers: its keys found, refused in a `shard`
//! pool when it cannot be split and its keys are on several servers, counted for the
//! statistics, and an inline command composed as the array servers are sent.

use cachelab_protocol::resp::{parse_command, Command, RespLimits};

use super::RespForward;
use crate::metrics::OpKind;
use crate::routing::plan::{Alive, Mode, Pool, ServerId};
use crate::routing::redis::commands::{key_args, CommandError, Spec, Split};
use crate::routing::redis::plan::Route;
use crate::routing::redis::split::{group_keys, Groups};
use crate::routing::spans::KeySpans;

/// Placement without ejections: whether a command's keys are on one server is decided
/// by where the pool puts them, not by which servers are out of service right now.
pub(super) struct NoneEjected;

impl Alive for NoneEjected {
    fn is_ejected(&self, _: ServerId) -> bool {
        false
    }
}

/// The forward of `command` (a routed command classified as `spec`, parsed from `buf`);
/// `groups` is the decoder's, reused across commands.
pub(super) fn forward(
    spec: &'static Spec,
    command: &Command<'_>,
    buf: &[u8],
    pool: &Pool,
    groups: &mut Groups,
) -> Result<RespForward, CommandError> {
    let keys = key_args(spec, command)?;
    if spec.split == Split::Never && keys.count() > 1 && matches!(pool.mode, Mode::Shard { .. }) {
        group_keys(pool, spec, command, keys, &NoneEjected, groups)?;
    }
    let count = keys.count() as u32;
    let op = match spec.name {
        "get" => OpKind::Get,
        "mget" if count > 1 => OpKind::MultiGet,
        "mget" => OpKind::Get,
        "set" => OpKind::Set,
        _ => OpKind::Other,
    };
    let (args, composed) = if command.is_inline() {
        let mut frame = Vec::new();
        command.compose(&mut frame);
        let (array, _) =
            parse_command(&frame, &RespLimits::default()).expect("a composed command parses");
        let spans = spans_of(&frame, &array);
        (spans, Some(frame))
    } else {
        (spans_of(buf, command), None)
    };
    Ok(RespForward {
        route: Route { spec, keys },
        op,
        keys: count,
        args,
        composed,
    })
}

/// The spans of `command`'s arguments, which borrow from `frame`.
fn spans_of(frame: &[u8], command: &Command<'_>) -> KeySpans {
    KeySpans::of(frame, command.args().iter().map(|a| &a[..]))
}
