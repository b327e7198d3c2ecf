//! Launch configurations in the Python reprs servers log them in: SGLang's
//! `ServerArgs(k=v, …)` or `{'k': v, …}`, vLLM's `Namespace(k=v, …)`,
//! `non-default args: {'k': v}` and engine `config: k=v, …` line.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::ServerArgs;

/// `key=value` in a dataclass/Namespace repr or `'key': value` in a dict repr.
static ARG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[(,{ ])'?(?P<key>[a-z_]+)'?(?:=|: )(?P<value>'[^']*'|[^,)}]+)")
        .expect("arg regex")
});

/// Picks the keys rules need; values are Python literals, of which only
/// numbers and plain strings are read (`None` stays absent).
pub(super) fn parse_server_args(repr: &str) -> ServerArgs {
    let mut args = ServerArgs::default();
    for c in ARG.captures_iter(repr) {
        let raw = c["value"].trim();
        let text = raw.trim_matches('\'');
        let quoted = raw.starts_with('\'');
        let int = || text.parse::<u32>().ok();
        let string = || (quoted && !text.is_empty()).then(|| text.to_owned());
        match &c["key"] {
            "model_path" | "model" => args.model_path = string(),
            "served_model_name" => args.served_model_name = string(),
            "tp_size" | "tensor_parallel_size" => args.tp_size = int(),
            "pp_size" | "pipeline_parallel_size" => args.pp_size = int(),
            "dp_size" | "data_parallel_size" => args.dp_size = int(),
            "ep_size" => args.ep_size = int(),
            "base_gpu_id" => args.base_gpu_id = int(),
            "gpu_id_step" => args.gpu_id_step = int(),
            "port" => args.port = int(),
            "nnodes" => args.nnodes = int(),
            "node_rank" => args.node_rank = int(),
            "host" => args.host = string(),
            "dist_init_addr" => args.dist_init_addr = string(),
            "mem_fraction_static" => args.mem_fraction_static = text.parse().ok(),
            "gpu_memory_utilization" => args.gpu_memory_utilization = text.parse().ok(),
            "max_model_len" | "max_seq_len" | "context_length" => {
                args.max_model_len = text.parse().ok();
            }
            _ => {}
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_dataclass_and_dict_reprs() {
        let a = parse_server_args(
            "ServerArgs(model_path='/models/Kimi-K2-Instruct', tp_size=8, mem_fraction_static=0.85, port=30000, base_gpu_id=0, gpu_id_step=1, context_length=None, ep_size=8, dist_init_addr='10.0.0.1:5000', nnodes=2, node_rank=1)",
        );
        assert_eq!(a.model_path.as_deref(), Some("/models/Kimi-K2-Instruct"));
        assert_eq!(
            (a.tp_size, a.ep_size, a.port, a.nnodes, a.node_rank),
            (Some(8), Some(8), Some(30000), Some(2), Some(1))
        );
        assert_eq!(a.mem_fraction_static, Some(0.85));
        assert_eq!(a.max_model_len, None);
        assert_eq!(a.dist_init_addr.as_deref(), Some("10.0.0.1:5000"));
        let d = parse_server_args(
            "{'model_path': '/models/x', 'tp_size': 4, 'base_gpu_id': 2, 'context_length': 32768}",
        );
        assert_eq!(
            (d.tp_size, d.base_gpu_id, d.max_model_len),
            (Some(4), Some(2), Some(32768))
        );
    }

    #[test]
    fn vllm_namespace_non_default_and_config_reprs() {
        let n = parse_server_args(
            "Namespace(host=None, port=8000, model='/models/Qwen2.5-72B-Instruct', tensor_parallel_size=4, pipeline_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=None, served_model_name=None)",
        );
        assert_eq!(
            n.model_path.as_deref(),
            Some("/models/Qwen2.5-72B-Instruct")
        );
        assert_eq!(
            (n.tp_size, n.pp_size, n.port),
            (Some(4), Some(1), Some(8000))
        );
        assert_eq!(n.gpu_memory_utilization, Some(0.9));
        assert_eq!(
            (n.host, n.max_model_len, n.served_model_name),
            (None, None, None)
        );
        let d = parse_server_args(
            "{'model': '/models/Qwen2.5-72B-Instruct', 'tensor_parallel_size': 4, 'max_model_len': 32768}",
        );
        assert_eq!((d.tp_size, d.max_model_len), (Some(4), Some(32768)));
        let c = parse_server_args(
            "model='/models/Qwen2.5-72B-Instruct', speculative_config=None, tokenizer='/models/Qwen2.5-72B-Instruct', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=4, pipeline_parallel_size=2, data_parallel_size=1",
        );
        assert_eq!(
            c.model_path.as_deref(),
            Some("/models/Qwen2.5-72B-Instruct")
        );
        assert_eq!(
            (c.tp_size, c.pp_size, c.dp_size, c.max_model_len),
            (Some(4), Some(2), Some(1), Some(32768))
        );
    }
}
