//! The event writer's side of the PostgreSQL store (see `boxoffice_store::engine`): loads,
//! reads and the group write are `boxoffice_store_sql`'s (`engine`, `group`); this backend
//! refreshes the planner's statistics after a group.

use boxoffice_store::engine::GroupWrite;

use crate::PgStore;

impl PgStore {
    /// After a committed group: the rows it changed count towards the next `ANALYZE` of the
    /// hold, order and payment tables (see `Statistics`).
    pub(crate) fn group_committed(&self, group: &GroupWrite<'_>) {
        let effects = &group.effects;
        self.statistics.wrote(
            (effects.map_seats().len()
                + effects.holds_created().count()
                + effects.checkouts_started().count()) as u64,
            &self.pool,
        );
    }
}
