"""The runtime's execution family: what runs on streams -- kernels and their binaries,
operators, system tasks, host callbacks, model run instances (capture, labels), overflow
detection, and the exception information of failed tasks."""
