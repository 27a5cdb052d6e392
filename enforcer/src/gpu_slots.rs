//! A GPU is its UUID: the engine's GPU id for each of this node's GPUs.
//!
//! nvidia-smi's `index` is an enumeration order, not an identity: when a GPU drops out of
//! enumeration (fallen off the bus, a driver reload without it) the GPUs after it are
//! renumbered, each one down, while their `uuid`s stay. Every sample handed to the policy
//! engine, and every GPU in a job's allocation ([`policy::GpuRef`]), therefore names the GPU by
//! a **slot** given once per UUID and never changed or reused: a GPU first seen at index `i`
//! gets slot `i` when no other UUID holds it (so on a node that never renumbered, slot and
//! index agree), else the lowest slot no UUID holds. The slots are kept in the state file, so
//! a restart routes each GPU's samples into the same windows.
//!
//! Why slots rather than dropping a window when the UUID at an index changes: the engine keeps
//! windows per job and allocation, and starts a job afresh whenever its allocation changes. With
//! slots, a job whose GPUs are renumbered keeps its allocation, so it keeps its windows and is
//! judged on its own GPUs without a gap; a job whose GPU is gone loses its kept placement
//! ([`crate::attribution::revalidate_kept`]) and is re-derived. No rule needs to compare
//! indices across cycles.

use crate::parse::smi::GpuReading;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Engine slots per GPU UUID (nvidia-smi `uuid`), kept in the state file (key `gpu_slots`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuSlots(pub BTreeMap<String, u16>);

impl GpuSlots {
    /// The slot of `uuid`, if it has one.
    pub fn slot(&self, uuid: &str) -> Option<u16> {
        self.0.get(uuid).copied()
    }

    /// Gives a slot to every GPU of `gpus` that has a UUID and none yet: its nvidia-smi
    /// `index` when no UUID holds that slot, else the lowest slot no UUID holds. A GPU without
    /// a UUID gets none (its readings are no evidence). Slots are never changed or reused,
    /// so a window never mixes two physical GPUs.
    pub fn assign(&mut self, gpus: &[GpuReading]) {
        let mut used: BTreeSet<u16> = self.0.values().copied().collect();
        for g in gpus {
            let Some(uuid) = g.uuid.as_deref() else { continue };
            if self.0.contains_key(uuid) {
                continue;
            }
            let slot = match g.index.filter(|i| !used.contains(i)) {
                Some(i) => Some(i),
                None => (0..=u16::MAX).find(|s| !used.contains(s)),
            };
            if let Some(s) = slot {
                used.insert(s);
                self.0.insert(uuid.to_string(), s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(index: u16, uuid: Option<&str>) -> GpuReading {
        GpuReading {
            index: Some(index),
            uuid: uuid.map(str::to_string),
            ..GpuReading::default()
        }
    }

    /// Slots follow the UUID through a renumbering, a replaced GPU gets a fresh slot, and a
    /// GPU without a UUID gets none.
    #[test]
    fn a_slot_follows_the_uuid() {
        let mut s = GpuSlots::default();
        s.assign(&[reading(0, Some("A")), reading(1, Some("B")), reading(2, Some("C"))]);
        assert_eq!((s.slot("A"), s.slot("B"), s.slot("C")), (Some(0), Some(1), Some(2)));
        // B falls off the bus: C is now index 1, and keeps slot 2.
        s.assign(&[reading(0, Some("A")), reading(1, Some("C"))]);
        assert_eq!(s.slot("C"), Some(2));
        // B is replaced by D at index 1: slot 1 is B's forever, D gets the lowest free one.
        s.assign(&[
            reading(0, Some("A")),
            reading(1, Some("D")),
            reading(2, Some("C")),
            reading(3, None),
        ]);
        assert_eq!(s.slot("D"), Some(3));
        assert_eq!(s.0.len(), 4, "no slot for a GPU without a UUID: {s:?}");
        // Survives the state file.
        let back: GpuSlots = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
