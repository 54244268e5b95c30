//! Sysinternals Testlimit (`/bin/testlimit.exe` in upstream's Windows resource-consumer image),
//! as upstream's Windows eviction case runs it: `testlimit.exe -accepteula -d MB -e N ... -c
//! COUNT` leaks and touches COUNT blocks of MB megabytes (the container's working set grows by
//! each block as it is touched) and then holds them until the process is stopped. The
//! simulator takes one block every [`BLOCK_EVERY`]; other switches (`-e`, trailing values)
//! change nothing it models.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Ctx, until_stopped};

/// How often one more block is touched.
const BLOCK_EVERY: Duration = Duration::from_millis(100);

/// Runs testlimit with `args`; returns its exit code.
pub async fn run(ctx: Ctx, args: &[String]) -> i32 {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a.eq_ignore_ascii_case(flag))
            .and_then(|i| args.get(i + 1))
    };
    let Some(block_mb) = value("-d").and_then(|v| megabytes(v)) else {
        ctx.out
            .err_line("Testlimit: -d needs a size in MB (the simulator models only leak-and-touch, -d)");
        return 1;
    };
    let count = match value("-c") {
        Some(c) => match c.parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                ctx.out.err_line(&format!("Testlimit: invalid count {c:?}"));
                return 1;
            }
        },
        None => u64::MAX,
    };
    ctx.out.line("Testlimit v5.24 - test Windows limits");
    ctx.out
        .line(&format!("Leaking private bytes with touch {block_mb} MB at a time..."));
    let mut tick = tokio::time::interval(BLOCK_EVERY);
    let mut done = 0u64;
    while done < count {
        tokio::select! {
            _ = ctx.cancel.cancelled() => return super::terminated_code(ctx.pod.os),
            _ = tick.tick() => {}
        }
        ctx.usage.extra_memory_bytes.fetch_add(block_mb << 20, Ordering::SeqCst);
        done += 1;
    }
    ctx.out.line(&format!(
        "Leaked {} MB of private memory ({done} allocations)",
        done * block_mb
    ));
    until_stopped(&ctx).await
}

/// `100Mb`, `100MB` or `100` as megabytes.
fn megabytes(v: &str) -> Option<u64> {
    let l = v.to_ascii_lowercase();
    l.strip_suffix("mb").unwrap_or(&l).parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ctx, text};
    use super::*;
    use crossconf_model::os::Os;

    #[tokio::test]
    async fn blocks_add_to_the_working_set_and_are_held() {
        let (c, out, _dir) = ctx(Os::Windows, "registry.k8s.io/e2e-test-images/resource-consumer:1.13", 3);
        let usage = c.usage.clone();
        let cancel = c.cancel.clone();
        let args: Vec<String> = ["-accepteula", "-d", "100Mb", "-e", "5", "20000s", "-c", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let task = tokio::spawn(async move { run(c, &args).await });
        let mut seen = 0;
        let mut pace = tokio::time::interval(Duration::from_millis(50));
        for _ in 0..100 {
            pace.tick().await;
            seen = usage.extra_memory_bytes.load(Ordering::SeqCst);
            if seen == 300 << 20 {
                break;
            }
        }
        assert_eq!(seen, 300 << 20, "{}", text(&out));
        cancel.cancel();
        assert_eq!(task.await.unwrap(), 1);
        assert_eq!(megabytes("300MB"), Some(300));
    }
}
