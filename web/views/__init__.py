"""Browser pages, one blueprint per area."""
