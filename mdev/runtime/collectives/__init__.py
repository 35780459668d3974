"""HCCL inside the runtime: communicators, their rendezvous and transports, the algorithms that
schedule a collective as stream tasks, and HCCL's API functions (api)."""
