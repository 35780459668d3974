"""The runtime's memory family: allocation and release (device, host, managed, VMM), pointer
attributes, copies and memsets (single, batched, 2-D), user allocators, DVPP memory."""
