//! Newtype identifiers.
//!
//! Schedulers see *local* ids: the CPUs and entities of their own level, numbered densely from 0,
//! so a scheduler can keep its per-CPU and per-entity state in plain vectors. The engine maps
//! local ids to its global tables.

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u32);

        impl $name {
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// A CPU of one scheduling level: a physical CPU at the host level, a vCPU inside a guest.
    CpuId
);
id_type!(
    /// An entity of one scheduling level: a vCPU at the host level, a task inside a guest.
    EntityId
);
id_type!(
    /// A domain (virtual machine). Domain 0 is the first domain of the scenario.
    DomainId
);
id_type!(
    /// A scheduling level: 0 is the host, each guest kernel is a level of its own.
    LevelId
);
id_type!(
    /// A global CPU index in the engine's table (any level).
    GCpu
);
id_type!(
    /// A global entity index in the engine's table (any level).
    GEnt
);
