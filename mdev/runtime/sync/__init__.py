"""The runtime's synchronisation family: events, notifies, counting notifies, and their
sharing (with device memory) between host processes by IPC keys."""
