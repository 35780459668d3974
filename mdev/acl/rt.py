"""``acl.rt``: the runtime functions, named and shaped as pyACL names and shapes them.

Each name binds an implementation from ``mdev.runtime``; ``bind(..., outputs=n)`` gives the
pyACL return shape (outputs first, ``ret`` last).  Handles and pointers are ints and 0 (or
None) is the default stream.
"""

from __future__ import annotations

from mdev.runtime import models as _graph_model
from mdev.runtime import (boundary, callbacks, devices, events, exceptions, ipc, kernels, limits, memops,
                          notify, streams, systasks, vmm)
from mdev.runtime.boundary import bind

# devices
set_device = bind(devices.set_device)
reset_device = bind(devices.reset_device)
reset_device_force = bind(devices.reset_device_force)
get_device = bind(devices.get_device, 1)
get_device_count = bind(devices.get_device_count, 1)
get_run_mode = bind(devices.get_run_mode, 1)
set_ts_device = bind(devices.set_ts_device)
get_device_info = bind(devices.get_device_info, 1)
get_mem_info = bind(devices.get_mem_info, 2)
synchronize_device = bind(streams.synchronize_device)
synchronize_device_with_timeout = bind(streams.synchronize_device_with_timeout)
device_get_stream_priority_range = bind(streams.device_get_stream_priority_range, 2)
device_get_bare_tgid = bind(devices.device_get_bare_tgid, 1)
get_devices_topo = bind(devices.get_devices_topo, 1)
device_can_access_peer = bind(devices.device_can_access_peer, 1)
device_enable_peer_access = bind(devices.device_enable_peer_access)
device_disable_peer_access = bind(devices.device_disable_peer_access)
device_peer_access_status = bind(devices.device_peer_access_status, 1)

# contexts
create_context = bind(devices.create_context, 1)
destroy_context = bind(devices.destroy_context)
set_context = bind(devices.set_context)
get_context = bind(devices.get_context, 1)
set_current_context = set_context          # C name aclrtSetCurrentContext (pyACL: set_context)
get_current_context = get_context          # C name aclrtGetCurrentContext (pyACL: get_context)
ctx_get_current_default_stream = bind(devices.ctx_get_current_default_stream, 1)
get_primary_ctx_state = bind(devices.get_primary_ctx_state, 2)
ctx_set_sys_param_opt = bind(devices.ctx_set_sys_param_opt)
ctx_get_sys_param_opt = bind(devices.ctx_get_sys_param_opt, 1)
set_sys_param_opt = bind(devices.set_sys_param_opt)
get_sys_param_opt = bind(devices.get_sys_param_opt, 1)

# streams
create_stream = bind(streams.create_stream, 1)
create_stream_with_config = bind(streams.create_stream_with_config, 1)
destroy_stream = bind(streams.destroy_stream)
destroy_stream_force = bind(streams.destroy_stream_force)
synchronize_stream = bind(streams.synchronize_stream)
synchronize_stream_with_timeout = bind(streams.synchronize_stream_with_timeout)
stream_query = bind(streams.stream_query, 1)
stream_get_id = bind(streams.stream_get_id, 1)
get_stream_id = stream_get_id
stream_get_priority = bind(streams.stream_get_priority, 1)
stream_get_flags = bind(streams.stream_get_flags, 1)
set_stream_failure_mode = bind(streams.set_stream_failure_mode)
stream_abort = bind(streams.stream_abort)
set_stream_attribute = bind(streams.set_stream_attribute)
get_stream_attribute = bind(streams.get_stream_attribute, 1)

# events
create_event = bind(events.create_event, 1)
create_event_with_flag = bind(events.create_event_with_flag, 1)
create_event_ex_with_flag = bind(events.create_event_ex_with_flag, 1)
destroy_event = bind(events.destroy_event)
record_event = bind(events.record_event)
reset_event = bind(events.reset_event)
stream_wait_event = bind(events.stream_wait_event)
query_event = bind(events.query_event, 1)
query_event_status = bind(events.query_event_status, 1)
query_event_wait_status = bind(events.query_event_wait_status, 1)
synchronize_event = bind(events.synchronize_event)
synchronize_event_with_timeout = bind(events.synchronize_event_with_timeout)
event_elapsed_time = bind(events.event_elapsed_time, 1, 0.0)
event_get_timestamp = bind(events.event_get_timestamp, 1)
get_event_id = bind(events.get_event_id, 1)
set_op_wait_timeout = bind(events.set_op_wait_timeout)

# notifies and memory-semantic synchronisation
create_notify = bind(notify.create_notify, 1)
destroy_notify = bind(notify.destroy_notify)
record_notify = bind(notify.record_notify)
wait_and_reset_notify = bind(notify.wait_and_reset_notify)
get_notify_id = bind(notify.get_notify_id, 1)
value_write = bind(notify.value_write)
value_wait = bind(notify.value_wait)

# host callbacks
launch_host_func = bind(callbacks.launch_host_func)
launch_callback = bind(callbacks.launch_callback)
subscribe_report = bind(callbacks.subscribe_report)
unsubscribe_report = bind(callbacks.unsubscribe_report)
process_report = bind(callbacks.process_report)

# memory
malloc = bind(memops.malloc, 1)
malloc_align32 = bind(memops.malloc_align32, 1)
malloc_cached = bind(memops.malloc, 1)
free = bind(memops.free)
malloc_host = bind(memops.malloc_host, 1)
free_host = bind(memops.free_host)
memcpy = bind(memops.memcpy)
memcpy_async = bind(memops.memcpy_async)
memcpy2d = bind(memops.memcpy2d)
memcpy2d_async = bind(memops.memcpy2d_async)
memset = bind(memops.memset)
memset_async = bind(memops.memset_async)


# kernels
binary_load_from_file = bind(kernels.binary_load_from_file, 1)
binary_load_from_data = bind(kernels.binary_load_from_data, 1)
binary_get_function = bind(kernels.binary_get_function, 1)
binary_get_function_by_entry = bind(kernels.binary_get_function_by_entry, 1)
binary_unload = bind(kernels.binary_unload)
function_get_param_count = bind(kernels.function_get_param_count, 1)
get_function_name = bind(kernels.get_function_name, 1, None)
launch_kernel = bind(kernels.launch_kernel)
launch_kernel_v2 = bind(kernels.launch_kernel_v2)
launch_kernel_with_config = bind(kernels.launch_kernel_with_config)
launch_kernel_with_host_args = bind(kernels.launch_kernel_with_host_args)
launch_kernel_with_args_array = bind(kernels.launch_kernel_with_args_array)
kernel_args_init = bind(kernels.kernel_args_init, 1)
kernel_args_get_mem_size = bind(kernels.kernel_args_get_mem_size, 1)
kernel_args_get_handle_mem_size = bind(kernels.kernel_args_get_handle_mem_size, 1)
kernel_args_append = bind(kernels.kernel_args_append, 1)
kernel_args_append_place_holder = bind(kernels.kernel_args_append_place_holder, 1)
kernel_args_get_place_holder_buffer = bind(kernels.kernel_args_get_place_holder_buffer, 1)
kernel_args_para_update = bind(kernels.kernel_args_para_update)
kernel_args_finalize = bind(kernels.kernel_args_finalize)

# core resource limits
set_device_res_limit = bind(limits.set_device_res_limit)
get_device_res_limit = bind(limits.get_device_res_limit, 1)
reset_device_res_limit = bind(limits.reset_device_res_limit)
set_stream_res_limit = bind(limits.set_stream_res_limit)
get_stream_res_limit = bind(limits.get_stream_res_limit, 1)
reset_stream_res_limit = bind(limits.reset_stream_res_limit)
use_stream_res_in_current_thread = bind(limits.use_stream_res_in_current_thread)
unuse_stream_res_in_current_thread = bind(limits.unuse_stream_res_in_current_thread)
get_res_in_current_thread = bind(limits.get_res_in_current_thread, 1)

# IPC
ipc_mem_get_export_key = bind(ipc.ipc_mem_get_export_key, 1, None)
ipc_mem_set_import_pid = bind(ipc.ipc_mem_set_import_pid)
ipc_mem_import_by_key = bind(ipc.ipc_mem_import_by_key, 1)
ipc_mem_close = bind(ipc.ipc_mem_close)
ipc_get_event_handle = bind(ipc.ipc_get_event_handle, 1, None)
ipc_open_event_handle = bind(ipc.ipc_open_event_handle, 1)
notify_get_export_key = bind(ipc.notify_get_export_key, 1, None)
notify_set_import_pid = bind(ipc.notify_set_import_pid)
notify_import_by_key = bind(ipc.notify_import_by_key, 1)

# virtual memory management
mem_get_allocation_granularity = bind(vmm.mem_get_allocation_granularity, 1)
malloc_physical = bind(vmm.malloc_physical, 1)
free_physical = bind(vmm.free_physical)
reserve_mem_address = bind(vmm.reserve_mem_address, 1)
release_mem_address = bind(vmm.release_mem_address)
map_mem = bind(vmm.map_mem)
unmap_mem = bind(vmm.unmap_mem)
mem_set_access = bind(vmm.mem_set_access)
mem_get_access = bind(vmm.mem_get_access, 1)
mem_retain_allocation_handle = bind(vmm.mem_retain_allocation_handle, 1)
mem_get_allocation_properties_from_handle = bind(vmm.mem_get_allocation_properties_from_handle, 1, None)
mem_export_to_shareable_handle = bind(vmm.mem_export_to_shareable_handle, 1)
mem_set_pid_to_shareable_handle = bind(vmm.mem_set_pid_to_shareable_handle)
mem_import_from_shareable_handle = bind(vmm.mem_import_from_shareable_handle, 1)
mem_export_to_shareable_handle_v2 = bind(vmm.mem_export_to_shareable_handle_v2, 1)
mem_set_pid_to_shareable_handle_v2 = bind(vmm.mem_set_pid_to_shareable_handle_v2)
mem_import_from_shareable_handle_v2 = bind(vmm.mem_import_from_shareable_handle_v2, 1)

# exception info
set_exception_info_callback = bind(exceptions.set_exception_info_callback)
exception_info_callback_register = bind(exceptions.exception_info_callback_register)
exception_info_callback_unregister = bind(exceptions.exception_info_callback_unregister)
get_device_id_from_exception_info = exceptions.get_device_id_from_exception_info
get_stream_id_from_exception_info = exceptions.get_stream_id_from_exception_info
get_task_id_from_exception_info = exceptions.get_task_id_from_exception_info
get_thread_id_from_exception_info = exceptions.get_thread_id_from_exception_info
get_error_code_from_exception_info = exceptions.get_error_code_from_exception_info

# errors
get_last_error = boundary.get_last_error
peek_at_last_error = boundary.peek_at_last_error

# system tasks
reduce_async = bind(systasks.reduce_async)
random_num_async = bind(systasks.random_num_async)

# model streams: aclrtActiveStream starts a non-head stream of a model being built
active_stream = bind(_graph_model.active_stream)

boundary.publish(globals())


# pyACL functions mdev does not emulate (yet): stubs returning ACL_ERROR_API_NOT_SUPPORT
def __getattr__(name: str):
    from mdev.acl.pyacl_names import resolve
    return resolve("rt", name)
