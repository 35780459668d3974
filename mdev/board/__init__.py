"""The board: a supervisor process and one process per emulated device."""
