"""Every function of the real pyACL extension, and what mdev does with it.

The name lists are pyACL's own method tables (``hicann/runtime``, ``python/pyACL/``:
``py_init_acl.cpp`` for ``acl.*``, ``rt/pyrt_methods.cpp`` for ``acl.rt.*``,
``mdl/pymdl_methods.cpp``, ``media/…``, ``op/…``, ``blas/…``, ``util/…``, ``prof/…``,
``himpi/…``, ``fv/…``).  Each name carries the shape of what pyACL returns, read from its
``Py_BuildValue`` call:

    "r"   ``ret`` alone                      ``ret = acl.rt.free(ptr)``
    "1".."5"  that many outputs, then ``ret``   ``ptr, ret = acl.rt.malloc(size, policy)``
    "v"   one value and no ``ret`` (a handle, size or enum; 0 when it fails)
    "s"   a string and no ``ret`` (None when it fails)
    "n"   None
    "?"   not recorded here: taken from the caller (``a, b, ret = …`` gets three items)

A name is *implemented* when the mdev module defines it.  Any other pyACL name resolves,
through the module's ``__getattr__``, to a stub that records ``ACL_ERROR_API_NOT_SUPPORT``
(200001) with the message "acl.<mod>.<name> is not supported by mdev (<why>)", warns once
(``MdevUnsupportedWarning``) and returns pyACL's shape.  A name pyACL does not have raises
AttributeError, so a typo still fails where it is made.

    python -m mdev.acl.pyacl_names --markdown      # the compatibility table (docs/pyacl_compat.md)
"""

from __future__ import annotations

import dis
import difflib
import importlib
import sys
import types
import warnings

# ----------------------------------------------------------------------------- name tables
# "name:shape" tokens, in the order of the method tables.  Names between the USE_MDL
# markers exist only in builds with USE_MDL (some of the rt group/UCE and mdl queue APIs).

_TOP = """
init:r finalize:r get_version:3 get_soc_name:s float16_to_float:v float_to_float16:v
create_data_buffer:v destroy_data_buffer:r get_data_buffer_addr:v get_data_buffer_size:v
get_data_buffer_size_v2:v update_data_buffer:r data_type_size:v create_tensor_desc:v
destroy_tensor_desc:n get_tensor_desc_type:v get_tensor_desc_format:v get_tensor_desc_size:v
get_tensor_desc_element_count:v get_tensor_desc_num_dims:v get_tensor_desc_dim:v
get_tensor_desc_name:s set_tensor_desc_name:n trans_tensor_desc_format:1 app_log:n
set_tensor_storage_format:r set_tensor_storage_shape:r set_tensor_format:r set_tensor_shape:r
set_tensor_origin_format:r set_tensor_dynamic_input:r set_tensor_origin_shape:r
set_tensor_shape_range:r get_tensor_desc_address:v get_tensor_desc_by_index:v
get_tensor_desc_dim_range:1 get_tensor_desc_dim_v2:1 set_tensor_place_ment:r
get_recent_err_msg:s set_tensor_const:r set_tensor_value_range:r get_cann_attribute_list:2
get_cann_attribute:1 get_device_capability:1 get_cann_version:1 finalize_reference:1
get_version_str:1
"""

_RT = """
binary_load_from_file:1 binary_load_from_data:1 get_function_addr:2 get_function_name:1
register_cpu_func:1 create_binary:v destroy_binary:r binary_load:1 binary_unload:r
binary_get_function:1 launch_kernel:r kernel_args_init:1 kernel_args_init_by_user_mem:r
kernel_args_get_mem_size:1 kernel_args_get_handle_mem_size:1 kernel_args_append:1
kernel_args_append_place_holder:1 kernel_args_get_place_holder_buffer:1
kernel_args_para_update:r kernel_args_finalize:r launch_kernel_with_config:r
set_device:r reset_device:r reset_device_force:r get_device:1 set_device_sat_mode:r
get_device_sat_mode:1 get_run_mode:1 set_ts_device:r get_device_count:1
create_context:1 destroy_context:r set_context:r get_context:1
ctx_get_current_default_stream:1 get_overflow_status:r reset_overflow_status:r
malloc:1 free:r get_mem_info:2 malloc_cached:1 mem_flush:r mem_invalidate:r malloc_host:1
free_host:r memcpy:r memcpy_async:r memset:r memset_async:r
create_stream:1 create_stream_with_config:1 destroy_stream:r destroy_stream_force:r
set_stream_overflow_switch:r get_stream_overflow_switch:1 set_stream_failure_mode:r
stream_query:1 create_event:1 create_event_with_flag:1 create_event_ex_with_flag:1
destroy_event:r synchronize_stream:r synchronize_stream_with_timeout:r process_report:r
subscribe_report:r unsubscribe_report:r launch_callback:r synchronize_device:r
record_event:r reset_event:r query_event:1 query_event_status:1 query_event_wait_status:1
synchronize_event:r synchronize_event_with_timeout:r event_elapsed_time:1
event_get_timestamp:1 get_event_id:1 get_event_avail_num:1 stream_wait_event:r
stream_get_id:1 get_stream_available_num:1 set_stream_attribute:r get_stream_attribute:1
get_thread_last_task_id:1 reduce_async:r
set_exception_info_callback:r get_error_code_from_exception_info:v
get_task_id_from_exception_info:v get_stream_id_from_exception_info:v
get_thread_id_from_exception_info:v get_device_id_from_exception_info:v
set_op_wait_timeout:r set_op_execute_time_out:r memcpy2d:r memcpy2d_async:r
reserve_mem_address:1 release_mem_address:r malloc_physical:1 free_physical:r
malloc_with_cfg:1 malloc_for_task_scheduler:1 malloc_host_with_cfg:1 map_mem:r unmap_mem:r
mem_export_to_shareable_handle:1 device_get_bare_tgid:1 mem_set_pid_to_shareable_handle:r
mem_import_from_shareable_handle:1 mem_get_allocation_granularity:1
get_device_utilization_rate:1 query_device_status:1 ctx_set_sys_param_opt:r
ctx_get_sys_param_opt:1 set_sys_param_opt:r get_sys_param_opt:1 malloc_align32:1
allocator_create_desc:v allocator_destroy_desc:r allocator_set_obj_to_desc:r
allocator_set_alloc_func_to_desc:r allocator_set_free_func_to_desc:r
allocator_set_alloc_advise_func_to_desc:r allocator_set_get_addr_from_block_func_to_desc:r
allocator_register:r allocator_unregister:r peek_at_last_error:r get_last_error:r
synchronize_device_with_timeout:r cmo_async:r device_task_abort:r
memcpy_async_with_condition:r stream_abort:r pointer_get_attributes:1 host_register:1
host_unregister:r get_memcpy_desc_size:1 set_memcpy_desc:1 memcpy_async_with_desc:r
value_write:r value_wait:r device_can_access_peer:1 device_enable_peer_access:r
device_disable_peer_access:r ipc_mem_get_export_key:1 ipc_mem_set_import_pid:r
ipc_mem_import_by_key:1 ipc_mem_close:r get_device_info:1
device_get_stream_priority_range:2 get_device_capability:1 get_device_res_limit:1
set_device_res_limit:r reset_device_res_limit:r get_devices_topo:1
create_notify:1 destroy_notify:r record_notify:r wait_and_reset_notify:r get_notify_id:1
notify_batch_reset:r notify_get_export_key:1 notify_set_import_pid:r notify_import_by_key:1
get_stream_res_limit:1 set_stream_res_limit:r reset_stream_res_limit:r
use_stream_res_in_current_thread:r unuse_stream_res_in_current_thread:r
get_res_in_current_thread:1 get_primary_ctx_state:2 get_logic_dev_id_by_user_dev_id:1
get_user_dev_id_by_logic_dev_id:1 get_logic_dev_id_by_phy_dev_id:1
get_phy_dev_id_by_logic_dev_id:1 set_op_execute_timeout_v2:1 get_op_timeout_interval:1
get_op_execute_timeout:1 device_get_uuid:1 device_peer_access_status:1 host_register_v2:r
host_get_device_pointer:1
USE_MDL set_group:r get_group_count:1 create_group_info:v destroy_group_info:r
get_all_group_info:r get_group_info_detail:1 get_mem_uce_info:1 mem_uce_repair:r
"""

_MDL = """
load_from_file:1 unload:r query_size:2 execute:r execute_async:r create_dataset:v
destroy_dataset:r get_dataset_buffer:v get_dataset_num_buffers:v add_dataset_buffer:1
get_output_size_by_index:v get_num_inputs:v get_num_outputs:v get_input_size_by_index:v
create_desc:v get_desc:r destroy_desc:r load_from_mem:1 load_from_file_with_mem:1
load_from_mem_with_mem:1 query_size_from_mem:2 set_dynamic_batch_size:r
set_dynamic_hw_size:r get_cur_output_dims:1 get_first_aipp_info:1 create_aipp:v
destroy_aipp:r get_input_dims:1 get_input_dims_v2:1 get_output_dims:1
get_input_name_by_index:s get_output_name_by_index:s get_input_format:v get_output_format:v
get_input_data_type:v get_output_data_type:v get_input_index_by_name:1
get_output_index_by_name:1 get_dynamic_batch:1 get_dynamic_hw:1 set_aipp_input_format:r
set_aipp_csc_params:r set_aipp_rbuv_swap_switch:r set_aipp_ax_swap_switch:r
set_aipp_src_image_size:r set_aipp_crop_params:r set_aipp_padding_params:r
set_aipp_dtc_pixel_mean:r set_aipp_dtc_pixel_min:r set_aipp_pixel_var_reci:r
set_input_aipp:r set_input_dynamic_dims:r get_input_dynamic_gear_count:1
get_input_dynamic_dims:1 create_and_get_op_desc:5 init_dump:r finalize_dump:r
get_aipp_type:2 set_aipp_by_input_index:r set_dump:r dump_reg_callback:r
dump_unreg_callback:n load_with_config:1 create_config_handle:v destroy_config_handle:r
set_config_opt:r get_tensor_real_name:s set_dataset_tensor_desc:1
get_dataset_tensor_desc:v get_op_attr:s get_aipp_data_size:1 create_exec_config_handle:v
destroy_exec_config_handle:r set_exec_config_opt:r execute_v2:r get_desc_from_file:r
get_desc_from_mem:r get_input_dims_range:1 bundle_load_from_file:1 bundle_load_from_mem:1
bundle_unload:r bundle_get_model_id:1 bundle_get_model_num:1
USE_MDL set_aipp_scf_params:r load_from_file_with_q:1 load_from_mem_with_q:1
"""

# Not in pyACL: the model-run-instance and capture functions (aclmdlRI*) of the C API,
# named by pyACL's rule aclmdlXxx -> acl.mdl.xxx with "RI" as one word.  mdev provides them
# in acl.mdl (mdev.graph); a name listed here that mdev.acl.mdl does not define is a stub.
_MDL_RI = """
ri_build_begin:1 ri_bind_stream:r ri_end_task:r ri_build_end:r ri_unbind_stream:r
ri_execute_async:r ri_execute:r ri_destroy:r ri_capture_begin:r ri_capture_end:1
ri_capture_get_info:2 ri_capture_thread_exchange_mode:1 ri_capture_task_grp_begin:r
ri_capture_task_grp_end:1 ri_capture_task_update_begin:r ri_capture_task_update_end:r
ri_debug_print:r ri_debug_json_print:r
"""

_UTIL = """
numpy_to_ptr:v numpy_contiguous_to_ptr:v ptr_to_numpy:v bytes_to_ptr:v ptr_to_bytes:v
start_thread:1 stop_thread:r
"""

_MEDIA = """
dvpp_malloc:1 dvpp_malloc_with_cfg:1 dvpp_free:r dvpp_create_channel:r dvpp_destroy_channel:r
dvpp_create_channel_desc:v dvpp_destroy_channel_desc:r dvpp_set_channel_desc_param:?
dvpp_get_channel_desc_param:? dvpp_get_channel_desc_channel_id:? dvpp_create_pic_desc:v
dvpp_destroy_pic_desc:r dvpp_set_pic_desc_data:r dvpp_set_pic_desc_size:r
dvpp_set_pic_desc_format:r dvpp_set_pic_desc_width:r dvpp_set_pic_desc_height:r
dvpp_set_pic_desc_width_stride:r dvpp_set_pic_desc_height_stride:r
dvpp_set_pic_desc_ret_code:r dvpp_get_pic_desc_data:v dvpp_get_pic_desc_size:v
dvpp_get_pic_desc_format:v dvpp_get_pic_desc_width:v dvpp_get_pic_desc_height:v
dvpp_get_pic_desc_width_stride:v dvpp_get_pic_desc_height_stride:v
dvpp_get_pic_desc_ret_code:v dvpp_create_stream_desc:v dvpp_destroy_stream_desc:r
dvpp_set_stream_desc_data:r dvpp_set_stream_desc_size:r dvpp_set_stream_desc_format:r
dvpp_set_stream_desc_timestamp:r dvpp_set_stream_desc_ret_code:r dvpp_set_stream_desc_eos:r
dvpp_get_stream_desc_data:v dvpp_get_stream_desc_size:v dvpp_get_stream_desc_format:v
dvpp_get_stream_desc_timestamp:v dvpp_get_stream_desc_ret_code:v dvpp_get_stream_desc_eos:v
dvpp_create_batch_pic_desc:v dvpp_destroy_batch_pic_desc:r dvpp_get_pic_desc:v
dvpp_vpc_resize_async:r dvpp_vpc_crop_async:r dvpp_vpc_batch_crop_async:?
dvpp_vpc_crop_and_paste_async:r dvpp_vpc_batch_crop_and_paste_async:?
dvpp_vpc_crop_resize_async:r dvpp_vpc_batch_crop_resize_async:?
dvpp_vpc_crop_resize_paste_async:r dvpp_vpc_batch_crop_resize_paste_async:?
dvpp_vpc_batch_crop_resize_make_border_async:? dvpp_create_roi_config:v
dvpp_destroy_roi_config:r dvpp_set_roi_config:r dvpp_set_roi_config_left:r
dvpp_set_roi_config_right:r dvpp_set_roi_config_top:r dvpp_set_roi_config_bottom:r
dvpp_create_resize_config:v dvpp_destroy_resize_config:r
dvpp_set_resize_config_interpolation:r dvpp_get_resize_config_interpolation:v
dvpp_jpeg_decode_async:r dvpp_jpeg_get_image_info:? dvpp_jpeg_get_image_info_v2:?
dvpp_jpeg_predict_dec_size:? dvpp_jpeg_encode_async:r dvpp_jpeg_predict_enc_size:?
dvpp_create_jpege_config:v dvpp_destroy_jpege_config:r dvpp_set_jpege_config_level:r
dvpp_get_jpege_config_level:v vdec_create_channel:r vdec_destroy_channel:r
vdec_create_channel_desc:v vdec_destroy_channel_desc:r vdec_set_channel_desc_channel_id:r
vdec_set_channel_desc_thread_id:r vdec_set_channel_desc_callback:r
vdec_set_channel_desc_entype:r vdec_set_channel_desc_out_pic_format:r
vdec_set_channel_desc_out_pic_width:r vdec_set_channel_desc_out_pic_height:r
vdec_set_channel_desc_ref_frame_num:r vdec_get_channel_desc_channel_id:v
vdec_get_channel_desc_thread_id:v vdec_get_channel_desc_callback:v
vdec_get_channel_desc_entype:v vdec_get_channel_desc_out_pic_format:v
vdec_get_channel_desc_out_pic_width:v vdec_get_channel_desc_out_pic_height:v
vdec_get_channel_desc_ref_frame_num:v vdec_send_frame:r vdec_send_skipped_frame:r
vdec_create_frame_config:v vdec_destroy_frame_config:r vdec_get_channel_desc_out_mode:?
vdec_set_channel_desc_out_mode:r vdec_get_channel_desc_bit_depth:?
vdec_set_channel_desc_bit_depth:r vdec_set_channel_desc_param:? vdec_get_channel_desc_param:?
venc_create_channel:r venc_destroy_channel:r venc_send_frame:r venc_create_channel_desc:v
venc_destroy_channel_desc:r venc_set_channel_desc_thread_id:r
venc_set_channel_desc_callback:r venc_set_channel_desc_entype:r
venc_set_channel_desc_pic_format:r venc_set_channel_desc_pic_width:r
venc_set_channel_desc_pic_height:r venc_set_channel_desc_key_frame_interval:r
venc_get_channel_desc_channel_id:v venc_get_channel_desc_thread_id:v
venc_get_channel_desc_callback:v venc_get_channel_desc_entype:v
venc_get_channel_desc_pic_format:v venc_get_channel_desc_pic_width:v
venc_get_channel_desc_pic_height:v venc_get_channel_desc_key_frame_interval:v
venc_create_frame_config:v venc_destroy_frame_config:r venc_set_frame_config_force_i_frame:r
venc_set_frame_config_eos:r venc_get_frame_config_force_i_frame:v venc_get_frame_config_eos:v
venc_get_channel_desc_buf_addr:v venc_set_channel_desc_buf_addr:r
venc_get_channel_desc_buf_size:v venc_set_channel_desc_buf_size:r
venc_get_channel_desc_max_bit_rate:v venc_set_channel_desc_max_bit_rate:r
venc_get_channel_desc_rc_mode:v venc_set_channel_desc_rc_mode:r
venc_get_channel_desc_src_rate:v venc_set_channel_desc_src_rate:r
venc_get_channel_desc_param:? venc_set_channel_desc_param:?
dvpp_create_border_config:v dvpp_destroy_border_config:r dvpp_set_border_config_value:r
dvpp_set_border_config_border_type:r dvpp_set_border_config_top:r
dvpp_set_border_config_bottom:r dvpp_set_border_config_left:r dvpp_set_border_config_right:r
dvpp_get_border_config_value:? dvpp_get_border_config_border_type:v
dvpp_get_border_config_top:v dvpp_get_border_config_bottom:v dvpp_get_border_config_left:v
dvpp_get_border_config_right:v dvpp_vpc_convert_color_async:r dvpp_vpc_pyr_down_async:r
dvpp_set_channel_desc_mode:r dvpp_png_decode_async:r dvpp_png_get_image_info:?
dvpp_png_predict_dec_size:?
USE_MDL dvpp_create_hist:v dvpp_destroy_hist:r dvpp_get_hist_dims:v dvpp_get_hist_data:?
dvpp_get_hist_ret_code:v dvpp_clear_hist:r dvpp_create_lut_map:? dvpp_destroy_lut_map:r
dvpp_get_lut_map_dims:v dvpp_get_lut_map_data:? dvpp_vpc_equalize_hist_async:r
dvpp_vpc_make_border_async:r dvpp_vpc_calc_hist_async:r
"""

_OP = """
set_model_dir:r load:? execute:r execute_with_handle:r cast:r create_handle_for_cast:?
create_attr:v destroy_attr:? set_attr_bool:r set_attr_int:r set_attr_float:r
set_attr_string:r set_attr_list_bool:r set_attr_list_int:r set_attr_list_float:r
set_attr_list_string:r set_attr_list_list_int:r create_handle:? destroy_handle:?
start_dump_args:r stop_dump_args:r register_compile_func:r unregister_compile_func:r
create_kernel:r set_kernel_args:r set_kernel_workspace_sizes:r update_params:r
execute_v2:r infer_shape:r set_attr_data_type:r set_attr_list_data_type:r
set_max_op_queue_num:r
"""

_BLAS = """
gemv_ex:r create_handle_for_gemv_ex:? hgemv:r create_handle_for_hgemv:? s8gemv:r
create_handle_for_s8gemv:? gemm_ex:r create_handle_for_gemm_ex:? hgemm:r
create_handle_for_hgemm:? s8gemm:r create_handle_for_s8gemm:?
"""

_PROF = """
create_config:v destroy_config:r init:r finalize:r start:r stop:r model_subscribe:r
model_un_subscribe:r model_unsubscribe:r create_subscribe_config:v
destroy_subscribe_config:r get_op_desc_size:? get_op_num:? get_op_type:? get_op_name:?
get_op_type_v2:? get_op_name_v2:? get_op_start:? get_op_end:? get_op_duration:?
get_model_id:? get_op_type_len:? get_op_name_len:? get_step_timestamp:?
destroy_step_info:? create_step_info:v create_stamp:v destroy_stamp:? push:r pop:r
range_start:? range_stop:r set_stamp_trace_message:r mark:r mark_ex:r set_config:r
"""

_HIMPI = """
sys_init:r sys_exit:r dvpp_malloc:? dvpp_free:r dvpp_get_version:? sys_create_epoll:?
sys_ctl_epoll:? sys_wait_epoll:? sys_close_epoll:? sys_set_chn_csc_matrix:?
sys_get_chn_csc_matrix:? sys_get_image_align_info:? vdec_create_chn:? vdec_destroy_chn:?
vdec_get_chn_attr:? vdec_set_chn_attr:? vdec_start_recv_stream:? vdec_stop_recv_stream:?
vdec_query_status:? vdec_reset_chn:? vdec_set_chn_param:? vdec_get_chn_param:?
vdec_set_protocol_param:? vdec_get_protocol_param:? vdec_send_stream:? vdec_get_frame:?
vdec_release_frame:? vdec_get_fd:? vdec_close_fd:? vdec_get_pic_buf_size:?
vdec_get_tmv_buf_size:? dvpp_get_image_info:? vdec_set_jpegd_precision_mode:?
vdec_get_jpegd_output_info:? vdec_set_display_mode:? vdec_get_display_mode:?
venc_create_chn:? venc_destroy_chn:? venc_start_chn:? venc_stop_chn:? venc_query_status:?
venc_get_stream:? venc_release_stream:? venc_send_frame:? venc_send_frame_ex:?
venc_set_mod_param:? venc_get_mod_param:? venc_request_idr:? venc_get_fd:? venc_close_fd:?
venc_set_jpeg_param:? venc_get_jpeg_param:? venc_set_chn_param:? venc_get_chn_param:?
venc_set_chn_attr:? venc_get_chn_attr:? venc_set_scene_mode:? venc_set_rc_param:?
venc_get_rc_param:? venc_set_jpeg_huffman_param:? venc_get_jpeg_huffman_param:?
venc_compact_jpeg_tables:? venc_send_jpege_frame:? venc_get_jpege_predicted_size:?
venc_get_scene_mode:? venc_set_cu_pred:? venc_get_cu_pred:? venc_set_h264_vui:?
venc_get_h264_vui:? venc_set_h265_vui:? venc_get_h265_vui:? venc_set_intra_refresh:?
venc_get_intra_refresh:? venc_set_ref_param:? venc_get_ref_param:? venc_set_roi_attr:?
venc_get_roi_attr:? venc_set_slice_split:? venc_get_slice_split:? venc_get_qpmap_stride:?
venc_get_qpmap_size:? venc_set_streamcopy_param:? venc_get_streamcopy_param:?
vpc_create_chn:? vpc_destroy_chn:? vpc_resize:? vpc_crop:? vpc_crop_resize:?
vpc_crop_resize_paste:? vpc_convert_color:? vpc_convert_color_v2:?
vpc_convert_color_to_yuv420:? vpc_copy_make_border:? vpc_pyrdown:? vpc_calc_hist:?
vpc_calc_hist_v2:? vpc_equalize_hist:? vpc_get_process_result:? vpc_sys_create_chn:?
vpc_crop_resize_make_border:? vpc_batch_crop_resize_paste:?
vpc_batch_crop_resize_make_border:? vpc_crop_resize_resize_paste:? vpc_dilate:?
vpc_draw_cover:? vpc_draw_line:? vpc_draw_mosaic:? vpc_draw_osd:? vpc_blur:?
vpc_gaussian_blur:? vpc_erode:? vpc_filter2d:? vpc_flip:? vpc_get_affine_lut:?
vpc_get_lut_mem_size:? vpc_get_affine_transform:? vpc_get_perspective_lut:?
vpc_get_remap_lut:? vpc_get_rotation_matrix:? vpc_lut_remap:? vpc_set_chn_workspace:?
vpc_median_blur:? vpc_rotate:? vpc_warp_affine:? vpc_set_chn_opt_attr:?
pngd_create_chn:? pngd_destroy_chn:? pngd_send_stream:? pngd_get_image_data:?
png_get_image_info:?
"""

_FV = """
create_init_para:v destory_init_para:r destroy_init_para:r set_1n_top_num:r
set_nm_top_num:r init:r release:r repo_add:r repo_del:r create_feature_info:v
destroy_feature_info:r create_repo_range:v destroy_repo_range:r delete:r modify:r
create_query_table:v destroy_query_table:r create_search_input:v destroy_search_input:r
create_search_result:v destroy_search_result:r search:r
"""


def _parse(text: str, extra: str = "") -> dict[str, tuple[str, str]]:
    """name -> (shape, tag); tag is "" or "USE_MDL" (or "mdev" for the RI extension)."""
    table: dict[str, tuple[str, str]] = {}
    for body, base_tag in ((text, ""), (extra, "mdev")):
        tag = base_tag
        for token in body.split():
            if token == "USE_MDL":
                tag = "USE_MDL"
                continue
            name, shape = token.split(":")
            table[name] = (shape, tag)
    return table


#: acl submodule ("" is the top level) -> {name: (shape, tag)}
FUNCTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "": _parse(_TOP),
    "rt": _parse(_RT),
    "mdl": _parse(_MDL, _MDL_RI),
    "util": _parse(_UTIL),
    "media": _parse(_MEDIA),
    "op": _parse(_OP),
    "blas": _parse(_BLAS),
    "prof": _parse(_PROF),
    "himpi": _parse(_HIMPI),
    "fv": _parse(_FV),
}

#: submodules mdev makes as small stub modules (every function unsupported)
STUB_MODULES = ("media", "op", "blas", "prof", "himpi", "fv")

# ----------------------------------------------------------------------------- why not
_FAMILY = {
    "media": "DVPP / JPEG / video codecs are not emulated",
    "himpi": "DVPP (hi_mpi) media processing is not emulated",
    "op": "single-operator compile and execution are not emulated",
    "blas": "CBLAS operators are not emulated",
    "prof": "the profiler is not emulated",
    "fv": "feature-vector retrieval is not emulated",
}

# (prefix or exact name, reason) tried in order for acl.rt and the top level
_RT_REASONS = [
    (("binary_", "create_binary", "destroy_binary", "get_function_", "register_cpu_func",
      "launch_kernel", "kernel_args_"), "this part of the kernel API is not emulated yet"),
    (("get_device_res_limit", "set_device_res_limit", "reset_device_res_limit",
      "get_stream_res_limit", "set_stream_res_limit", "reset_stream_res_limit",
      "use_stream_res_in_current_thread", "unuse_stream_res_in_current_thread",
      "get_res_in_current_thread"), "this resource-limit function is not emulated yet"),
    (("reserve_mem_address", "release_mem_address", "malloc_physical", "free_physical",
      "map_mem", "unmap_mem", "mem_export_to_shareable_handle", "mem_set_pid_to_shareable_handle",
      "mem_import_from_shareable_handle", "mem_get_allocation_granularity"),
     "virtual memory management (VMM) is planned (issue 6)"),
    (("ipc_mem_", "notify_get_export_key", "notify_set_import_pid", "notify_import_by_key"),
     "IPC is planned (issue 6)"),
    (("allocator_",), "external allocators are not emulated"),
    (("set_group", "get_group_count", "create_group_info", "destroy_group_info",
      "get_all_group_info", "get_group_info_detail"), "AI Core groups are not emulated"),
    (("get_mem_uce_info", "mem_uce_repair"), "HBM UCE errors are not emulated"),
    (("set_device_sat_mode", "get_device_sat_mode", "get_overflow_status", "reset_overflow_status",
      "set_stream_overflow_switch", "get_stream_overflow_switch"),
     "floating-point overflow detection is not emulated"),
    (("host_register", "host_unregister", "host_get_device_pointer"),
     "host memory registration is not emulated yet"),
    (("create_data_buffer", "destroy_data_buffer", "get_data_buffer_", "update_data_buffer",
      "data_type_size", "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_",
      "set_tensor_", "trans_tensor_desc_format"),
     "data buffers and tensor descriptors (for model and operator execution) are not emulated"),
    (("get_cann_", "get_version_str"), "there is no CANN package to query"),
]


def reason(module: str, name: str) -> str:
    """Why ``acl.<module>.<name>`` is not available in mdev (for messages and the table)."""
    if module in _FAMILY:
        return _FAMILY[module]
    if module == "mdl":
        if FUNCTIONS["mdl"].get(name, ("", ""))[1] == "mdev":
            return "this model-run-instance function is not emulated yet"
        return "offline models (.om loading, execution, AIPP, dump) are not emulated"
    for prefixes, why in _RT_REASONS:
        if name.startswith(prefixes):
            return why
    return "not emulated yet"


# ----------------------------------------------------------------------------- stubs
class MdevUnsupportedWarning(UserWarning):
    """A pyACL function that mdev does not emulate was called."""


def _caller_unpack_count(frame) -> int | None:
    """How many names the caller unpacks our result into (``a, b = f()`` -> 2), if it does."""
    if frame is None:
        return None
    try:
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset > frame.f_lasti:
                return ins.arg if ins.opname == "UNPACK_SEQUENCE" else None
    except Exception:  # no bytecode to look at: fall back to a bare ret
        return None
    return None


def make_stub(module: str, name: str, shape: str):
    qualified = f"acl.{module}.{name}" if module else f"acl.{name}"
    message = f"{qualified} is not supported by mdev ({reason(module, name)})"
    warned = []

    def stub(*args, **kwargs):
        from mdev import errors as E
        from mdev.runtime.boundary import record_error

        code = E.ACL_ERROR_API_NOT_SUPPORT
        record_error(code, message)
        if not warned:
            warned.append(True)
            warnings.warn(message, MdevUnsupportedWarning, stacklevel=2)
        if shape == "r":
            return code
        if shape == "v":
            return 0
        if shape in ("s", "n"):
            return None
        if shape == "?":
            n = _caller_unpack_count(sys._getframe(1))
            return code if not n else (None,) * (n - 1) + (code,)
        return (None,) * int(shape) + (code,)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"{message}: returns ACL_ERROR_API_NOT_SUPPORT (200001) as pyACL's return shape."
    stub.mdev_unsupported = True
    return stub


def module_getattr(module: str):
    """A module-level ``__getattr__``: stubs for pyACL names, AttributeError for the rest."""
    table = FUNCTIONS[module]
    stubs: dict[str, types.FunctionType] = {}
    qualified = f"acl.{module}" if module else "acl"

    def __getattr__(name: str):
        if name in table:
            stub = stubs.get(name)
            if stub is None:
                stub = stubs[name] = make_stub(module, name, table[name][0])
            return stub
        hint = difflib.get_close_matches(name, list(table), n=1) if not name.startswith("__") else []
        raise AttributeError(f"module {qualified!r} has no attribute {name!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))

    return __getattr__


_getattrs: dict[str, object] = {}


def resolve(module: str, name: str):
    """What ``acl.<module>.<name>`` is when the mdev module does not define it.

    The mdev modules call this from their ``__getattr__`` (lazily, so importing mdev.acl
    does not import this table).  At the top level it also yields the stub submodules.
    """
    if module == "" and name in STUB_MODULES:
        return stub_module(name)
    getter = _getattrs.get(module)
    if getter is None:
        getter = _getattrs[module] = module_getattr(module)
    return getter(name)


def stub_module(module: str) -> types.ModuleType:
    """``mdev.acl.<module>`` for a pyACL submodule none of whose functions mdev emulates."""
    full = f"mdev.acl.{module}"
    mod = sys.modules.get(full)
    if mod is None:
        mod = types.ModuleType(full, f"acl.{module}: {_FAMILY[module]}; every function returns "
                                     "ACL_ERROR_API_NOT_SUPPORT (200001).")
        mod.__getattr__ = module_getattr(module)
        sys.modules[full] = mod
        setattr(sys.modules["mdev.acl"], module, mod)
    return mod


# ----------------------------------------------------------------------------- status
def mdev_module(module: str) -> types.ModuleType:
    if module in STUB_MODULES:
        importlib.import_module("mdev.acl")
        return stub_module(module)
    return importlib.import_module("mdev.acl" + (f".{module}" if module else ""))


def is_implemented(module: str, name: str) -> bool:
    value = vars(mdev_module(module)).get(name)
    return callable(value) and not isinstance(value, types.ModuleType) \
        and not getattr(value, "mdev_unsupported", False)


def status(module: str, name: str) -> str:
    """"implemented", "planned" (a later issue) or "unsupported"."""
    if is_implemented(module, name):
        return "implemented"
    return "planned" if "planned" in reason(module, name) else "unsupported"


_HELPER_MODULES = ("mdev.errors", "mdev.constants", "mdev.acl.pyacl_names", "mdev.runtime.boundary")


def extensions(module: str) -> list[str]:
    """Public functions mdev's module has that pyACL's does not."""
    mod = mdev_module(module)
    table = FUNCTIONS[module]
    names = []
    for name, value in vars(mod).items():
        if name.startswith("_") or name in table or isinstance(value, (types.ModuleType, type)):
            continue
        origin = getattr(value, "__module__", "") or ""
        if callable(value) and origin.startswith("mdev.") and origin not in _HELPER_MODULES:
            names.append(name)
    return sorted(names)


def counts() -> dict[str, dict[str, int]]:
    result = {}
    for module, table in FUNCTIONS.items():
        c = {"implemented": 0, "planned": 0, "unsupported": 0}
        for name, (_, tag) in table.items():
            if tag != "mdev":
                c[status(module, name)] += 1
        result[module] = c
    return result


# ----------------------------------------------------------------------------- C names
_C_OVERRIDES = {
    ("rt", "set_context"): "aclrtSetCurrentContext",
    ("rt", "get_context"): "aclrtGetCurrentContext",
    ("rt", "unsubscribe_report"): "aclrtUnSubscribeReport",
    ("rt", "binary_unload"): "aclrtBinaryUnLoad",
    ("rt", "set_op_execute_timeout_v2"): "aclrtSetOpExecuteTimeOutV2",
    ("rt", "get_op_timeout_interval"): "aclrtGetOpTimeOutInterval",
    ("", "get_version"): "aclrtGetVersion",
    ("", "get_soc_name"): "aclrtGetSocName",
    ("", "get_cann_version"): "aclsysGetCANNVersion",
    ("", "get_version_str"): "aclsysGetVersionStr",
    ("", "app_log"): "ACL_APP_LOG",
}


def c_name(module: str, name: str) -> str:
    if (module, name) in _C_OVERRIDES:
        return _C_OVERRIDES[module, name]
    camel = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
    prefix = {"": "acl", "rt": "aclrt", "mdl": "aclmdl"}.get(module, "")
    if module == "mdl" and name.startswith("ri_"):
        camel = "RI" + camel[2:]
    return prefix + camel if prefix else ""


# ----------------------------------------------------------------------------- markdown
_SHAPE_TEXT = {"r": "`ret`", "v": "value", "s": "str", "n": "None", "?": "—"}

_DIFFERENCES = """\
## Differences that remain

* **Bad arguments.** pyACL's argument parser raises `TypeError`/`ValueError` for arguments
  of the wrong type or number; mdev returns `ACL_ERROR_INVALID_PARAM` (100000) and records a
  message (`acl.get_recent_err_msg()`), like every other failure.  `acl.util` helpers raise,
  as pyACL's do.
* **`None` as a handle.** mdev accepts `None` as the default stream wherever pyACL takes `0`.
* **Unsupported functions are attributes.** Every pyACL name resolves (`hasattr` is True), but
  `dir(acl.<mod>)` lists only what mdev implements, so the samples' probe
  `"bytes_to_ptr" in dir(acl.util)` reflects what works.  Calling an unsupported function
  returns `ACL_ERROR_API_NOT_SUPPORT` (200001) in pyACL's return shape (outputs `None`, or 0
  / `None` for functions without `ret`), sets the thread's last error and message, and
  warns once with `MdevUnsupportedWarning` (silence it with
  `warnings.simplefilter("ignore", mdev.acl.pyacl_names.MdevUnsupportedWarning)`).
* **Integer widths.** pyACL narrows some outputs in `Py_BuildValue` (`get_device_info` and
  `get_devices_topo` to 32 bits); mdev returns the full value.
* **Threads.** `acl.util.start_thread` starts a Python `threading.Thread`; `stop_thread`
  joins it (the function must return, e.g. when its loop flag is cleared), as pyACL's does.
* **Pointers.** Device addresses are integers above 2^48 and never collide with host
  addresses; host pointers from `bytes_to_ptr`/`numpy_to_ptr` are real addresses of the
  process, as in pyACL.
* **Model run instances / capture (`acl.mdl.ri_*`).** Not part of pyACL's method table (pyACL
  has no `aclmdlRI*` wrappers); mdev puts them under `acl.mdl`, named by pyACL's rule with
  "RI" as one word (`aclmdlRICaptureBegin` -> `acl.mdl.ri_capture_begin`).  They are listed
  in the `acl.mdl` table but not counted above.  Each is also available under its full
  snake_case name (`acl.mdl.mdl_ri_capture_begin`), and `aclrtActiveStream` (starting a
  non-head stream of a built model) is `acl.rt.active_stream`.
"""


def markdown() -> str:
    c = counts()
    total = {k: sum(m[k] for m in c.values()) for k in ("implemented", "planned", "unsupported")}
    out = [
        "# pyACL compatibility",
        "",
        "Generated by `python -m mdev.acl.pyacl_names --markdown` from the name table in",
        "`mdev/acl/pyacl_names.py` (pyACL's own method tables, `hicann/runtime` `python/pyACL/`)",
        "and the functions mdev defines; a test keeps this file in step with the code.",
        "",
        "Status: **implemented** — mdev emulates it; **planned** — a later issue will; "
        "**unsupported** — returns `ACL_ERROR_API_NOT_SUPPORT` (200001) with the message "
        "\"acl.&lt;mod&gt;.&lt;name&gt; is not supported by mdev (…)\".  "
        "Returns: what pyACL returns (`n + ret`: n outputs, then `ret`).",
        "",
        "| module | implemented | planned | unsupported | total |",
        "|---|---:|---:|---:|---:|",
    ]
    for module, m in c.items():
        out.append(f"| `acl{'.' + module if module else ''}` | {m['implemented']} | {m['planned']} | "
                   f"{m['unsupported']} | {sum(m.values())} |")
    out.append(f"| **all** | **{total['implemented']}** | **{total['planned']}** | "
               f"**{total['unsupported']}** | **{sum(total.values())}** |")
    out.append("")
    out.append(_DIFFERENCES)
    for module in ("", "rt", "util", "mdl"):
        label = "acl" + (f".{module}" if module else "")
        out += [f"## `{label}`", "", "| function | C API | returns | status | notes |", "|---|---|---|---|---|"]
        for name, (shape, tag) in FUNCTIONS[module].items():
            st = status(module, name)
            parts = [{"USE_MDL": "only in USE_MDL builds", "mdev": "not in pyACL (mdev extension)"}.get(tag, ""),
                     "" if st == "implemented" else reason(module, name)]
            note = "; ".join(p for p in parts if p)
            returns = _SHAPE_TEXT.get(shape) or f"{shape} + `ret`"
            cname = c_name(module, name)
            out.append(f"| `{label}.{name}` | {f'`{cname}`' if cname else ''} | {returns} | {st} | {note} |")
        ext = extensions(module)
        if ext:
            out += ["", f"mdev extensions in `{label}` (not in pyACL): "
                    + ", ".join(f"`{n}`" for n in ext) + "."]
        out.append("")
    for module in STUB_MODULES:
        names = FUNCTIONS[module]
        out += [f"## `acl.{module}`", "",
                f"All {len(names)} functions unsupported: {_FAMILY[module]}.", "",
                ", ".join(f"`{n}`" for n in names), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mdev.acl.pyacl_names",
                                     description="pyACL function table and mdev's coverage of it")
    parser.add_argument("--markdown", action="store_true", help="print the compatibility table")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
    else:
        for module, m in counts().items():
            print(f"acl{'.' + module if module else '':<7} {m}")
    return 0


if __name__ == "__main__":
    # run the copy mdev.acl uses, not this __main__ one (their stubs and classes must agree)
    from mdev.acl import pyacl_names as _canonical
    sys.exit(_canonical.main())
