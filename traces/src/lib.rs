//! The trace format and importers; filled in by the traces issue.
