"""Pool validator (KEP-4815 "Future options"): a ResourcePoolStatus for every resource pool."""
