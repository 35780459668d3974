"""The runtime's device family: aclInit/aclFinalize, setting and resetting devices, contexts,
peer access, what a device reports (info, status, limits, groups), cluster nodes, threads."""
