//! The built-in rule catalog: one file per rule, listed here once. The
//! catalog tests fail when a file in this folder is missing from `RULES` or
//! its id does not match its file name.

mod address_already_in_use;
mod bind_refused;
mod container_killed_137;
mod container_restart_loop;
mod control_plane_watch_gap;
mod cpu_illegal_instruction;
mod cuda_illegal_memory_access;
mod cuda_oom_at_context_creation;
mod cuda_unavailable;
mod dataparallel_gpu_imbalance;
mod dcgm_diag_failed;
mod ecc_uncorrectable_or_remap_pending;
mod fabric_manager_mismatch;
mod fabric_manager_no_nvswitch;
mod fabric_manager_start_failure;
mod gpu_fell_off_bus_no_xid;
mod gpu_hardware_slowdown;
mod gpu_held_by_unresolved_process;
mod gpu_init_failed;
mod gpu_memory_taken_before_load;
mod gpu_memory_unaccounted;
mod gpu_pod_unschedulable;
mod gpu_reset_refused_in_use;
mod gpu_uninitialisable_after_jobs;
mod gpu_wedged_unkillable_process;
mod gsp_heartbeat_timeout;
mod hf_model_download_failure;
mod hf_model_load_failure;
mod host_memory_allocation_refused;
mod hung_task_in_nvidia_driver;
mod idle_worker_holds_gpu_memory;
mod k8s_device_plugin_xid;
mod kernel_oom_killer;
mod known_message;
mod nccl_duplicate_gpu;
mod nccl_error;
mod nccl_init_cuda_failure;
mod nccl_socket_host_local_interfaces;
mod nccl_watchdog_timeout;
#[cfg(test)]
mod new_rule_template;
mod nvidia_driver_not_loaded;
mod nvidia_probe_failed;
mod nvidia_smi_gpu_err_row;
mod nvidia_smi_gpu_unreachable;
mod nvlink_links_inactive;
mod nvml_driver_library_mismatch;
mod ollama_app_respawn_loop;
mod ollama_load_exceeds_host_memory;
mod ollama_model_stuck_stopping;
mod ollama_vram_not_recovered;
mod orphans_beside_restarted_daemon;
mod process_died;
mod process_outlived_its_job;
mod process_segfault;
mod request_hung_until_stop;
mod scheduler_no_progress;
mod second_server_instance;
mod server_killed_no_kernel_line;
mod server_older_than_client;
mod serving_process_untracked;
mod sglang_child_failed;
mod sglang_cuda_graph_capture_failed;
mod sglang_kv_not_enough_memory;
mod sglang_mem_fraction_below_weights;
mod sglang_runtime_kv_pressure;
mod sglang_unbalanced_memory;
mod sglang_watchdog_timeout;
mod slurm_step_cancelled_long_stage;
mod stale_notebook_server;
mod stale_serving_process;
mod startup_stage_stalled;
mod startup_stalled_after_worker_init;
mod startup_wait_unanswered;
mod symptom_wording;
mod systemd_crash_loop;
mod systemd_start_limit_hit;
mod systemd_stop_timeout;
mod torch_cuda_oom;
mod tp_size_mismatch;
mod trtllm_cuda_oom;
mod trtllm_kv_cache_too_small;
mod unit_exit_nonzero;
mod unit_exited_zero_no_restart;
mod unsupported_hardware;
mod vllm_cuda_graph_capture_oom;
mod vllm_custom_allreduce_expandable_segments;
mod vllm_engine_core_failed;
mod vllm_insufficient_free_memory;
mod vllm_kv_cache_init_failed;
mod vllm_max_model_len_exceeds_kv;
mod vllm_no_kv_cache_memory;
mod vllm_profile_charged_other_memory;
mod vllm_shm_broadcast_hang;
mod watchdog_backend_left_running;
mod xid_app_fault;
mod xid_ecc;
mod xid_gpu_fell_off_bus;
mod xid_gsp_timeout;
mod xid_nvlink;
mod xid_recovery_action;

use crate::rules::Rule;
use crate::rules::{KNOWN_MESSAGE, PROCESS_DIED};

/// Every built-in rule, in id order.
pub static RULES: &[&dyn Rule] = &[
    &address_already_in_use::RULE,
    &bind_refused::RULE,
    &container_killed_137::RULE,
    &container_restart_loop::RULE,
    &control_plane_watch_gap::RULE,
    &cpu_illegal_instruction::RULE,
    &cuda_illegal_memory_access::RULE,
    &cuda_oom_at_context_creation::RULE,
    &cuda_unavailable::RULE,
    &dataparallel_gpu_imbalance::RULE,
    &dcgm_diag_failed::RULE,
    &ecc_uncorrectable_or_remap_pending::RULE,
    &fabric_manager_mismatch::RULE,
    &fabric_manager_no_nvswitch::RULE,
    &fabric_manager_start_failure::RULE,
    &gpu_fell_off_bus_no_xid::RULE,
    &gpu_hardware_slowdown::RULE,
    &gpu_held_by_unresolved_process::RULE,
    &gpu_init_failed::RULE,
    &gpu_memory_taken_before_load::RULE,
    &gpu_memory_unaccounted::RULE,
    &gpu_pod_unschedulable::RULE,
    &gpu_reset_refused_in_use::RULE,
    &gpu_uninitialisable_after_jobs::RULE,
    &gpu_wedged_unkillable_process::RULE,
    &gsp_heartbeat_timeout::RULE,
    &hf_model_download_failure::RULE,
    &hf_model_load_failure::RULE,
    &host_memory_allocation_refused::RULE,
    &hung_task_in_nvidia_driver::RULE,
    &idle_worker_holds_gpu_memory::RULE,
    &k8s_device_plugin_xid::RULE,
    &kernel_oom_killer::RULE,
    &known_message::RULE,
    &nccl_duplicate_gpu::RULE,
    &nccl_error::RULE,
    &nccl_init_cuda_failure::RULE,
    &nccl_socket_host_local_interfaces::RULE,
    &nccl_watchdog_timeout::RULE,
    &nvidia_driver_not_loaded::RULE,
    &nvidia_probe_failed::RULE,
    &nvidia_smi_gpu_err_row::RULE,
    &nvidia_smi_gpu_unreachable::RULE,
    &nvlink_links_inactive::RULE,
    &nvml_driver_library_mismatch::RULE,
    &ollama_app_respawn_loop::RULE,
    &ollama_load_exceeds_host_memory::RULE,
    &ollama_model_stuck_stopping::RULE,
    &ollama_vram_not_recovered::RULE,
    &orphans_beside_restarted_daemon::RULE,
    &process_died::RULE,
    &process_outlived_its_job::RULE,
    &process_segfault::RULE,
    &request_hung_until_stop::RULE,
    &scheduler_no_progress::RULE,
    &second_server_instance::RULE,
    &server_killed_no_kernel_line::RULE,
    &server_older_than_client::RULE,
    &serving_process_untracked::RULE,
    &sglang_child_failed::RULE,
    &sglang_cuda_graph_capture_failed::RULE,
    &sglang_kv_not_enough_memory::RULE,
    &sglang_mem_fraction_below_weights::RULE,
    &sglang_runtime_kv_pressure::RULE,
    &sglang_unbalanced_memory::RULE,
    &sglang_watchdog_timeout::RULE,
    &slurm_step_cancelled_long_stage::RULE,
    &stale_notebook_server::RULE,
    &stale_serving_process::RULE,
    &startup_stage_stalled::RULE,
    &startup_stalled_after_worker_init::RULE,
    &startup_wait_unanswered::RULE,
    &symptom_wording::RULE,
    &systemd_crash_loop::RULE,
    &systemd_start_limit_hit::RULE,
    &systemd_stop_timeout::RULE,
    &torch_cuda_oom::RULE,
    &tp_size_mismatch::RULE,
    &trtllm_cuda_oom::RULE,
    &trtllm_kv_cache_too_small::RULE,
    &unit_exit_nonzero::RULE,
    &unit_exited_zero_no_restart::RULE,
    &unsupported_hardware::RULE,
    &vllm_cuda_graph_capture_oom::RULE,
    &vllm_custom_allreduce_expandable_segments::RULE,
    &vllm_engine_core_failed::RULE,
    &vllm_insufficient_free_memory::RULE,
    &vllm_kv_cache_init_failed::RULE,
    &vllm_max_model_len_exceeds_kv::RULE,
    &vllm_no_kv_cache_memory::RULE,
    &vllm_profile_charged_other_memory::RULE,
    &vllm_shm_broadcast_hang::RULE,
    &watchdog_backend_left_running::RULE,
    &xid_app_fault::RULE,
    &xid_ecc::RULE,
    &xid_gpu_fell_off_bus::RULE,
    &xid_gsp_timeout::RULE,
    &xid_nvlink::RULE,
    &xid_recovery_action::RULE,
];
