//! `container-restart-loop`: a container `docker ps` lists as restarted by
//! its runtime again and again: `Restarting (1) 44 seconds ago` (its restart
//! policy waiting to start it again after it exited), or up for seconds
//! though it was created minutes or hours before while the containers
//! beside it stayed up. The container's own logs say why it exits.
//! Advice only.

use crate::correlate::Incident;
use crate::model::ContainerRow;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ContainerRestartLoop = ContainerRestartLoop;

pub struct ContainerRestartLoop;

/// Up this long or less: started again just before the listing.
const JUST_STARTED_SECS: u64 = 59;

/// Created at least this long before: not a container being created now.
const CREATED_LONG_AGO_SECS: u64 = 300;

/// Up for at most this share of its life: started again long after its
/// creation, not run since.
const SHARE: u64 = 10;

static META: RuleMeta = RuleMeta {
    id: "container-restart-loop",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "a container `docker ps` lists as restarting (`Restarting (1) 44 seconds ago`), or up for seconds though created minutes before",
    anchors: &[],
    doc: r#"
## What it means
`docker ps` (or `docker compose ps`) lists a container whose `STATUS` says
the runtime keeps starting it again:

- `Restarting (N) T ago`: its last run exited with status N T ago, and its
  restart policy (`--restart always`, `unless-stopped`, `on-failure`;
  compose's `restart:`) is waiting to start it once more (moby's
  `container.State.String()`). Docker doubles the wait after each quick
  exit, so a container caught in the loop shows this status most of the
  time.
- `Up 10 seconds` on a container `CREATED` 16 minutes ago (up for under a
  minute, created at least five minutes before and ten times longer ago
  than it has been up): it was started again seconds before the listing.
  Alone this is also what `docker restart` looks like, so it is read as a
  loop at a modest confidence, higher when other containers of the same
  listing stayed up all along (a pod's sandbox, the stack's database).

The container's process is what exits: its last lines say why (a model
path that does not exist, a missing GPU, a crash); the restarts only hide
it, and a control plane above (GPUStack, compose) may still report the
instance as starting.

## Why it happens
The program in the container fails at start-up or soon after (a bad
argument or model path, no GPU in the container, a port taken, an
out-of-memory kill) and its restart policy starts it again.

## How to confirm
`docker logs --tail 100 NAME` shows the last run's output (`docker logs
--since` for an earlier one); `docker inspect -f '{{.RestartCount}}
{{json .State}}' NAME` counts the restarts and gives the last exit code and
`OOMKilled`.

## How to fix
Fix what the container's last lines name and start it again; while
investigating, `docker update --restart=no NAME` stops the loop without
removing the container.

## Safety
Advice only: no container is stopped or changed.
"#,
};

impl Rule for ContainerRestartLoop {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let rows = &incident.facts.container_rows;
        for row in rows {
            let steady = rows
                .iter()
                .filter(|o| o.span.source == row.span.source && o.name != row.name)
                .filter(|o| just_started(o).is_none() && o.restarting.is_none())
                .find(|o| o.up_for.is_some_and(|u| u >= CREATED_LONG_AGO_SECS));
            if let Some(code) = row.restarting {
                out.push(restarting(row, code, steady));
            } else if let Some((up, created)) = just_started(row) {
                out.push(started_again(row, up, created, steady));
            }
        }
    }
}

/// (Up for, created ago), in seconds, for a container up a minute or
/// less though created much earlier.
fn just_started(row: &ContainerRow) -> Option<(u64, u64)> {
    let up = row.up_for?;
    let created = row.created_ago?;
    (up <= JUST_STARTED_SECS
        && created >= CREATED_LONG_AGO_SECS
        && created >= up.saturating_mul(SHARE))
    .then_some((up, created))
}

/// Seconds as the daemon rounds them, for the headline.
fn duration(seconds: u64) -> String {
    match seconds {
        0 => "less than a second".to_owned(),
        1 => "1 second".to_owned(),
        s if s < 60 => format!("{s} seconds"),
        s if s < 3_600 => format!("{} minutes", s / 60),
        s if s < 172_800 => format!("{} hours", s / 3_600),
        s => format!("{} days", s / 86_400),
    }
}

/// The container's name for a command, where it is one Docker accepts
/// (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`); else a placeholder.
fn name_arg(row: &ContainerRow) -> &str {
    let valid = row
        .name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && row
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid {
        row.name.as_str()
    } else {
        "CONTAINER"
    }
}

fn restarting(row: &ContainerRow, code: i64, steady: Option<&ContainerRow>) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let name = &row.name;
    f.evidence_marked(
        row.span,
        format!("docker lists {name} as restarting: its last run exited with status {code}, and its restart policy starts it again"),
        "Restarting",
    );
    f.condition(
        format!("the runtime is restarting {name} (`Restarting ({code})`)"),
        true,
    );
    cite_steady(&mut f, steady);
    f.title = format!("container {name} is in a restart loop (exit status {code})");
    f.headline = format!(
        "Container {name} keeps exiting and Docker keeps restarting it: `docker ps` shows `{}`, the last run having exited with status {code}.",
        row.status
    );
    finish(&mut f, row, 0.6, 0.8);
    f
}

fn started_again(
    row: &ContainerRow,
    up: u64,
    created: u64,
    steady: Option<&ContainerRow>,
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let name = &row.name;
    f.evidence_marked(
        row.span,
        format!(
            "{name} has been up {} though it was created {} ago: it was started again just before the listing",
            duration(up),
            duration(created)
        ),
        row.status.as_str(),
    );
    f.condition(
        format!("{name} was created long before its current run began"),
        true,
    );
    cite_steady(&mut f, steady);
    f.title = format!(
        "container {name} restarted {} ago, {} after its creation",
        duration(up),
        duration(created.saturating_sub(up))
    );
    f.headline = format!(
        "Container {name} was started again {} before this listing though it was created {} ago (`{}`): its process exits and its restart policy brings it back.",
        duration(up),
        duration(created),
        row.status
    );
    finish(&mut f, row, 0.35, 0.55);
    f
}

/// Another container of the same listing up all along: the host and the
/// daemon did not restart, this container did.
fn cite_steady(f: &mut Finding, steady: Option<&ContainerRow>) {
    if let Some(o) = steady {
        f.evidence(
            o.span,
            format!(
                "{} stayed up meanwhile (`{}`): the daemon and the host did not restart",
                o.name, o.status
            ),
        );
    }
    f.condition(
        "another container of the same listing stayed up all along",
        steady.is_some(),
    );
}

fn finish(f: &mut Finding, row: &ContainerRow, base: f64, top: f64) {
    let name = name_arg(row);
    f.chain
        .push(format!("container {} is restarted over and over", row.name));
    f.chain
        .push("its process exits soon after each start; its last lines say why".to_owned());
    f.explanation = "A container's restart policy hides why it exits: the reason is in the last run's own output, which `docker logs` keeps across restarts.".to_owned();
    f.actions.push(Action::advice(
        format!("read {}'s last lines for why its process exits (a bad model path or argument, no GPU in the container, a crash), and its restart count and last exit", row.name),
        Some(&format!(
            "docker logs --tail 100 {name}; docker inspect -f '{{{{.RestartCount}}}} {{{{json .State}}}}' {name}"
        )),
    ));
    f.actions.push(Action::advice(
        "while investigating, stop the loop without removing the container",
        Some(&format!("docker update --restart=no {name}")),
    ));
    f.confidence = confidence(f, base, top);
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// https://github.com/gpustack/gpustack/issues/2937 (real case 1292):
    /// the instance's serving container up 10 seconds, created 16 minutes
    /// ago, beside its pause sandbox up 16 minutes.
    #[test]
    fn a_container_up_seconds_long_after_its_creation_is_a_loop() {
        let f = findings(concat!(
            "CONTAINER ID   IMAGE                           COMMAND                  CREATED             STATUS             PORTS                                       NAMES\n",
            "3d3eb5bb85fd   4aea8980b104                    \"tini -- vox-box sta…\"   16 minutes ago      Up 10 seconds                                                  cosyvoice2-0.5b-JXx4S-run-0\n",
            "6267d609c682   873ed7510279                    \"/pause\"                 21 minutes ago      Up 16 minutes                                                  cosyvoice2-0.5b-JXx4S-pause\n",
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::UnitCrashLoop);
        assert!(f[0].headline.contains("Up 10 seconds"), "{}", f[0].headline);
        assert!(
            f[0].headline.contains("16 minutes ago"),
            "{}",
            f[0].headline
        );
        assert_eq!(f[0].evidence.len(), 2, "the pause container is cited");
    }

    /// v-kostyukov/Internship-2021 task7: `docker ps` with the zabbix agent
    /// restarting among containers up for hours; those restarted 4 hours
    /// ago, 45 hours after their creation, are no loop.
    #[test]
    fn a_restarting_status_is_a_loop_and_an_old_restart_is_not() {
        let f = findings(concat!(
            "CONTAINER ID   IMAGE                                        COMMAND                  CREATED         STATUS                          PORTS                                              NAMES\n",
            "38d3aee9f053   zabbix/zabbix-agent2:5.4.2-alpine            \"/sbin/tini -- /usr/…\"   44 hours ago    Restarting (1) 44 seconds ago                                                      zabbix-agent\n",
            "41b1ad3d1e64   zabbix/zabbix-web-nginx-mysql:5.4.2-ubuntu   \"docker-entrypoint.sh\"   45 hours ago    Up 4 hours                      0.0.0.0:80->8080/tcp, :::80->8080/tcp              zabbix-frontend\n",
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.contains("zabbix-agent"), "{}", f[0].title);
        assert!(f[0].title.contains("exit status 1"), "{}", f[0].title);
    }

    /// A stack just brought up (https://github.com/DanTup/dgx_dashboard/issues/1):
    /// up as long as it exists.
    #[test]
    fn containers_up_since_their_creation_are_no_loop() {
        let f = findings(concat!(
            "CONTAINER ID   IMAGE                COMMAND                  CREATED         STATUS         PORTS                                           NAMES\n",
            "88f32688b78c   ollama/ollama        \"/bin/ollama serve\"      3 minutes ago   Up 3 minutes   0.0.0.0:11434->11434/tcp, :::11434->11434/tcp   ollama\n",
        ));
        assert!(f.is_empty(), "{f:?}");
    }
}
