"""Memory building blocks shared by host and device processes: segments, addresses, allocator."""
