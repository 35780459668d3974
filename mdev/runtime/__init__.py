"""Host side of mdev: what runs inside the user's process behind ``mdev.acl``."""
