//! The conversation a request belongs to ([`crate::conversation`]) and, when affinity
//! applies to its model, where its previous turn went: the routing plan's [`Affine`].

use super::{Call, Endpoint, body};
use crate::conversation::{self, Turn};
use crate::metering::tags::ClientTags;
use crate::upstream::strategy::Affine;

impl Call<'_> {
    /// The request's turn of a conversation (`count_tokens` belongs to none).
    pub(super) fn turn(&self, head: &body::Head, tags: Option<&ClientTags>) -> Option<Turn> {
        if self.endpoint == Endpoint::CountTokens {
            return None;
        }
        let named = tags.is_some_and(|t| t.session_id.is_some());
        let first = if named { 0 } else { head.first_turn };
        let principal = self.principal.label();
        Some(Turn {
            key: conversation::key(tags, &principal, head.system, first),
            system: head.system,
            tools: head.tools,
        })
    }

    /// Affinity for `model` (`routing.affinity`), with the upstream of the previous turn
    /// (not looked up with one candidate: the key still ranks a pool's keys).
    pub(super) fn affine(
        &self,
        model: &str,
        turn: Option<&Turn>,
        candidates: usize,
    ) -> Option<Affine> {
        let turn = turn?;
        let gw = self.gw;
        if !gw.config.routing.affinity.applies(model) {
            return None;
        }
        let previous = (candidates > 1)
            .then(|| gw.conversations.previous(turn.key, gw.deps.clock.now()))
            .flatten()
            .and_then(|name| gw.upstreams.list.iter().position(|u| *u.name == *name));
        Some(Affine {
            key: turn.key,
            previous,
        })
    }
}
