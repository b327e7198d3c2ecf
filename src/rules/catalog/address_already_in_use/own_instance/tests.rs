//! Tests of `own_instance`: real pastes of a failed bind whose holder is
//! the server's own earlier instance.

use crate::rules::Category;
use crate::testing::findings_of;

fn one(text: &str) -> crate::rules::Finding {
    let mut f = findings_of("address-already-in-use", text);
    assert_eq!(f.len(), 1, "{f:?}");
    f.remove(0)
}

/// fixtures/real/826 (TheLastBen/fast-stable-diffusion
/// #1913): gradio closes its server on port 3000 for the web UI's
/// restart, and the relaunch cannot bind 3000.
const REAL_826: &str = "Closing server running on port: 3000\n\
    Restarting UI...\n\
    Civitai: API loaded\n\
    Traceback (most recent call last):\n  File \"/usr/local/lib/python3.10/dist-packages/gradio/networking.py\", line 119, in start_server\n    s.bind((LOCALHOST_NAME, server_port))\n\
    OSError: [Errno 98] Address already in use\n\
    OSError: Port 3000 is in use. If a gradio.Blocks is running on the port, yo\n";

#[test]
fn a_restart_that_collided_with_its_own_server() {
    let f = one(REAL_826);
    assert_eq!(f.category, Category::StaleServingInstance);
    // Stopped through the web UI's console, not TGI's (3000 is TGI's
    // default too).
    assert!(
        format!("{:?}", f.actions).contains("Reload UI"),
        "{:?}",
        f.actions
    );
    assert!(f.title.contains("3000"), "{}", f.title);
    // The stop lines are cited.
    crate::testing::cites_line(&f, 1);
    // The same stop on another port is not this bind's.
    let other =
        REAL_826
            .replacen("port: 3000", "port: 7860", 1)
            .replacen("Restarting UI...\n", "", 1);
    assert_eq!(one(&other).category, Category::PortInUse);
    // The stop after the failed bind is no cause of it.
    let after = "OSError: Port 3000 is in use. If a gradio.Blocks is running on the port, yo\nClosing server running on port: 3000\n";
    assert_eq!(one(after).category, Category::PortInUse);
}

/// The next paste: A1111's Reload UI ending in gradio's newer wording
/// (`Cannot find empty port in range: 7860-7860`,
/// AUTOMATIC1111/stable-diffusion-webui#16543's line after a close on
/// the same port, assembled, not copied).
#[test]
fn a_reload_ui_in_gradios_newer_wording() {
    let text = "Closing server running on port: 7860\n\
        OSError: Cannot find empty port in range: 7860-7860. You can specify a different port by setting the GRADIO_SERVER_PORT environment variable or passing the `server_port` parameter to `launch()`\n";
    let f = one(text);
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(f.title.contains("7860"), "{}", f.title);
}

/// fixtures/real/807 (ollama/ollama#2372): `ollama
/// serve` cannot bind 11434 and the app then refuses to quit; the same
/// bind alone (fixtures/real/043, 044) stays a port in use naming
/// Ollama as the likely holder, and another app's refusal is no cause.
#[test]
fn a_quit_refused_and_the_port_alone() {
    let bind = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n";
    let quit = "21:25: execution error: Ollama got an error: User canceled. (-128)\n";
    let f = one(&format!("{bind}{quit}"));
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(
        format!("{:?}", f.actions).contains("Quit Ollama"),
        "{:?}",
        f.actions
    );
    crate::testing::cites_line(&f, 2);
    let docker = quit.replace("Ollama got", "Docker got");
    let f = one(&format!("{bind}{docker}"));
    assert_eq!(f.category, Category::PortInUse);
    assert!(f.headline.contains("Ollama"), "{}", f.headline);
    let alone = one(bind);
    assert_eq!(alone.category, Category::PortInUse);
    assert!(
        alone.headline.contains("default port of Ollama"),
        "{}",
        alone.headline
    );
    // Windows' wording: netstat finds the holder.
    let win = one(
        "Error: listen tcp 0.0.0.0:11434: bind: Only one usage of each socket address (protocol/network address/port) is normally permitted.\n",
    );
    crate::testing::advises(&win, "findstr :11434");
    // A port no server has as its default names none.
    let none = one("Error: listen tcp 127.0.0.1:44319: bind: address already in use\n");
    assert!(!none.headline.contains("default port"), "{}", none.headline);
}

/// fixtures/real/448's `systemctl status ollama` (ollama/ollama#6369:
/// the service active, its process `ollama serve`) beside
/// ollama/ollama#14963's bind error (batch L's 920), both verbatim, the
/// combination ours: a second copy of the running server; the same
/// status beside a bind of another port is no cause. Ollama's app
/// starting its own server (ollama/ollama#9960's app.log) reads the
/// same way.
#[test]
fn the_same_server_running_beside_the_bind() {
    let status = "$  systemctl status ollama
● ollama.service - Ollama Service
 Loaded: loaded (/etc/systemd/system/ollama.service; enabled; vendor preset: enabled)
 Active: active (running) since Wed 2024-08-14 19:56:09 PDT; 35min ago
   Main PID: 772316 (ollama)
 CGroup: /system.slice/ollama.service
         └─772316 /usr/local/bin/ollama serve

";
    let bind = "Error: listen tcp 0.0.0.0:11434: bind: address already in use\n";
    let f = one(&format!("{status}$ ollama serve\n{bind}"));
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.note.contains("ollama.service is active")),
        "{:?}",
        f.evidence
    );
    let other = one(&format!(
        "{status}Error: listen tcp 127.0.0.1:44319: bind: address already in use\n"
    ));
    assert_eq!(other.category, Category::PortInUse);
    let app = "time=2025-03-24T14:07:26.157+08:00 level=INFO source=server.go:127 msg=\"started ollama server with pid 8792\"\n";
    let f = one(&format!("{app}{bind}"));
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(one(bind).category == Category::PortInUse);
}

/// The next paste: vLLM restarted in the same log, uvicorn's bind error
/// after its own `Uvicorn running on` for the port (both wordings are
/// catalogs/startup.toml's and stacks-bind.toml's samples; assembled,
/// not copied); llama-server's `couldn't bind` after an earlier
/// `server is listening on` for 8080.
#[test]
fn the_port_served_earlier_in_the_same_log() {
    let text = "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n\
        ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n";
    assert_eq!(one(text).category, Category::StaleServingInstance);
    let other = text.replace("0.0.0.0:8000 (", "0.0.0.0:8001 (");
    assert_eq!(one(&other).category, Category::PortInUse);
    let llama = "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n\
        main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080\n";
    assert_eq!(one(llama).category, Category::StaleServingInstance);
}

/// fixtures/real/825 (RVC-Project/Retrieval-based-
/// Voice-Conversion-WebUI#291): gradio's bind error beside `netstat`'s
/// `1/python3` on the port: a port in use that names PID 1 as the
/// container's own server; the same row of another PID or program
/// does not.
#[test]
fn a_second_copy_beside_the_containers_main_process() {
    let text = "OSError: [Errno 98] Address already in use\n\
        OSError: Port 7865 is in use. If a gradio.Blocks is running on the port, you can close() it or gradio.close_all().\n\
        # netstat -ltnp | grep :7865\n\
        tcp        0      0 0.0.0.0:7865            0.0.0.0:*               LISTEN      1/python3\n";
    let f = one(text);
    assert_eq!(f.category, Category::PortInUse);
    assert!(
        f.headline.contains("container's main process"),
        "{}",
        f.headline
    );
    assert!(f.entities.pids.contains(&1));
    let other = one(&text.replace("1/python3", "4242/python3"));
    assert!(
        !other.headline.contains("container's main process"),
        "{}",
        other.headline
    );
    let nginx = one(&text.replace("1/python3", "1/nginx"));
    assert!(
        !nginx.headline.contains("container's main process"),
        "{}",
        nginx.headline
    );
}

/// Zulip's run-dev (batch Q 1065, zulip/zulip#11386): the launcher lists
/// its ports, the proxy's bind fails with no port named, and run-dev says
/// itself that another copy runs: a stale instance on the proxy's port.
const ZULIP: &str = "$ ./tools/run-dev.py\n\
    Starting Zulip services on ports: web proxy: 9991, Django: 9992, Tornado: 9993, Thumbor: 9995, webpack: 9994\n\
    Note: only port 9991 is exposed to the host in a Vagrant environment.\n\
    \n\
    ERROR: You probably have another server running!!!\n\
    \n\
    Traceback (most recent call last):\n\
    \x20 File \"./tools/run-dev.py\", line 421, in <module>\n\
    \tapp.listen(proxy_port, address=options.interface)\n\
    OSError: [Errno 98] Address already in use\n\
    Terminated\n";

#[test]
fn a_server_saying_another_copy_runs_is_its_own_stale_instance() {
    let f = one(ZULIP);
    assert_eq!(f.category, Category::StaleServingInstance, "{f:?}");
    assert!(f.title.contains("9991"), "{}", f.title);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.note.contains("another copy of it is running")),
        "{f:?}"
    );
}

/// The same bind without run-dev's words stays a port in use: the port
/// list alone names the port, not the holder.
#[test]
fn a_launchers_port_list_alone_names_the_port_not_the_holder() {
    let text = ZULIP.replace("ERROR: You probably have another server running!!!\n", "");
    let f = one(&text);
    assert_eq!(f.category, Category::PortInUse, "{f:?}");
    assert!(f.title.contains("9991"), "{}", f.title);
}

/// https://github.com/litespeedtech/openlitespeed/issues/163 (batch R
/// case 1113): a restart's new OpenLiteSpeed cannot bind its WebAdmin
/// listener, named only `adminListener`, while the old instance's child
/// is still shutting down gracefully: the port is read from the
/// `failed to start listener on address *:7080!` line after it, the old
/// child's PID is the holder's, and the server's giving-up lines are
/// cited. Without the child's line it stays a port in use on 7080.
#[test]
fn an_openlitespeed_restart_that_raced_its_old_child() {
    let text = "[ERROR] HttpListener::start(): Can't listen at address adminListener: Address already in use!\n\
[ERROR] HttpServer::addListener(adminListener) failed to create new listener\n\
[ERROR] [config:admin:listener:adminListener] failed to start listener on address *:7080!\n\
[ERROR] [config:admin:listener] No listener is available for admin virtual host!\n\
[ERROR] Fatal error in configuration, exit! \n\
[NOTICE] [Child: 282657] Start shutting down gracefully ...\n\
lswsctrl[282758]: [OK] litespeed: graceful stop.\n\
lswsctrl[282770]: [OK] litespeed: pid=282783.\n\
lswsctrl[282795]: [ERROR] litespeed is not running.\n";
    let f = one(text);
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(f.title.contains("7080"), "{}", f.title);
    assert!(f.entities.pids.contains(&282657), "{:?}", f.entities);
    assert!(!f.entities.pids.contains(&282783), "{:?}", f.entities);
    for line in [3, 5, 6, 9] {
        crate::testing::cites_line(&f, line);
    }
    let bind_only: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    let f = one(&bind_only);
    assert_eq!(f.category, Category::PortInUse);
    assert!(f.title.contains("7080"), "{}", f.title);
}

/// Apache's own wording (https://github.com/interbrite/letsencrypt-vesta/issues/18,
/// batch R case 1114; https://github.com/jide/clamp/issues/24 for 2.4's
/// AH00072): a port in use on the address's port, with its giving-up line
/// cited; `(13)Permission denied` before the same words is no such finding.
#[test]
fn apaches_make_sock_is_a_port_in_use() {
    let text = "Starting httpd: (98)Address already in use: make_sock: could not bind to address xxx.xxx.xxx.xxx:8080\n\
no listening sockets available, shutting down\n\
Unable to open logs\n";
    let f = one(text);
    assert_eq!(f.category, Category::PortInUse);
    assert!(f.title.contains("8080"), "{}", f.title);
    crate::testing::cites_line(&f, 2);
    let f =
        one("(48)Address already in use: AH00072: make_sock: could not bind to address [::]:80\n");
    assert!(f.title.contains(" 80"), "{}", f.title);
    assert!(
        findings_of(
            "address-already-in-use",
            "(13)Permission denied: AH00072: make_sock: could not bind to address 0.0.0.0:80\n"
        )
        .is_empty()
    );
}

/// benoitc/gunicorn#1386 (batch S 1167): the running master 5155 handles
/// `term` and its workers exit, then a new master 4065 cannot bind
/// 127.0.0.1:5000 (gunicorn's own `Connection in use`): the earlier
/// master, still stopping, holds the port; its PID is the holder's.
const GUNICORN_1386: &str = "[2016-11-08 11:33:29 +0000] [5155] [INFO] Handling signal: term\n\
    [2016-11-08 11:33:29 +0000] [5161] [INFO] Worker exiting (pid: 5161)\n\
    [2016-11-08 11:33:29 +0000] [5162] [INFO] Worker exiting (pid: 5162)\n\
    [2016-11-08 10:48:16 +0000] [4065] [INFO] Starting gunicorn 19.6.0\n\
    [2016-11-08 10:48:16 +0000] [4065] [ERROR] Connection in use: ('127.0.0.1', 5000)\n\
    [2016-11-08 10:48:16 +0000] [4065] [ERROR] Retrying in 1 second.\n";

#[test]
fn an_earlier_gunicorn_master_told_to_stop_holds_the_port() {
    let f = one(GUNICORN_1386);
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(f.entities.pids.contains(&5155), "{:?}", f.entities.pids);
    assert!(!f.entities.pids.contains(&4065), "{:?}", f.entities.pids);
    crate::testing::cites_line(&f, 1);
    assert!(f.title.contains("5000"), "{}", f.title);
    assert!(
        format!("{:?}", f.actions).contains("stopasgroup"),
        "{:?}",
        f.actions
    );
    // The failing master's own stop is no earlier instance.
    let own = GUNICORN_1386.replacen("[5155] [INFO] Handling", "[4065] [INFO] Handling", 1);
    assert_eq!(one(&own).category, Category::PortInUse);
    // A stop after the failed bind is no cause of it.
    let (stop, rest) = GUNICORN_1386.split_at(GUNICORN_1386.find('\n').unwrap() + 1);
    assert_eq!(one(&format!("{rest}{stop}")).category, Category::PortInUse);
}

/// The bind failure alone, in gunicorn's words (paperless-ng#230, the
/// next such paste: a supervisor respawning gunicorn, five tries and
/// `Can't connect to`): a port in use on 8000 naming no earlier instance,
/// the give-up line cited.
#[test]
fn gunicorns_bind_failure_alone_is_a_port_in_use() {
    let text = "2020-12-31 08:34:00,756 INFO spawned: 'gunicorn' with pid 132\n\
        [2020-12-31 08:34:00 +0100] [132] [INFO] Starting gunicorn 20.0.4\n\
        [2020-12-31 08:34:00 +0100] [132] [ERROR] Connection in use: ('localhost', 8000)\n\
        [2020-12-31 08:34:00 +0100] [132] [ERROR] Retrying in 1 second.\n\
        [2020-12-31 08:34:04 +0100] [132] [ERROR] Connection in use: ('localhost', 8000)\n\
        [2020-12-31 08:34:04 +0100] [132] [ERROR] Retrying in 1 second.\n\
        [2020-12-31 08:34:05 +0100] [132] [ERROR] Can't connect to ('localhost', 8000)\n\
        2020-12-31 08:34:05,914 INFO exited: gunicorn (exit status 1; not expected)\n";
    let f = one(text);
    assert_ne!(f.category, Category::StaleServingInstance);
    assert!(f.title.contains("8000"), "{}", f.title);
    crate::testing::cites_line(&f, 7);
    // gunicorn's give-up line alone says only that it could not listen.
    assert!(
        findings_of(
            "address-already-in-use",
            "[2020-12-31 08:34:05 +0100] [132] [ERROR] Can't connect to ('localhost', 8000)\n"
        )
        .is_empty()
    );
}

/// https://github.com/pyload/pyload/pull/3820 (real case batch-u/1303):
/// pyLoad restarted in place; the new Flask server's bind fails in the OS's
/// German (`Die Adresse wird bereits verwendet`) with no port named, and
/// the old server, never stopped, answers the UI's next poll.
#[test]
fn a_request_answered_after_the_failed_bind_is_the_old_server() {
    let text = "  File \"/usr/lib/python3.8/socketserver.py\", line 466, in server_bind\n    self.socket.bind(self.server_address)\n\
        OSError: [Errno 98] Die Adresse wird bereits verwendet\n\
        python-BaseException\n\
        127.0.0.1 - - [31/Oct/2020 07:36:07] \"POST /json/status HTTP/1.1\" 200 -\n";
    let f = one(text);
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.note.contains("POST /json/status")),
        "{:?}",
        f.evidence
    );
    // A request answered before the failed bind, or refused, says nothing
    // of who holds the port now.
    let before = "127.0.0.1 - - [31/Oct/2020 07:36:07] \"POST /json/status HTTP/1.1\" 200 -\n\
        OSError: [Errno 98] Die Adresse wird bereits verwendet\n";
    assert_eq!(one(before).category, Category::PortInUse);
    let refused = text.replace("\" 200 -", "\" 500 -");
    assert_eq!(one(&refused).category, Category::PortInUse);
}

/// geerlingguy/ansible-role-php#190 (reduced): the unit's stop exited with
/// success before the start whose bind failed: the old master kept the
/// port. Without a stop that succeeded (a first start), or when the failed
/// bind is another process's, it is a port in use only.
const NGINX_UNIT: &str = "● nginx.service - LSB: Stop/start nginx\n   Loaded: loaded (/etc/init.d/nginx)\n   Active: failed (Result: exit-code) since Mon 2017-04-24 11:39:52 GMT; 9min ago\n  Process: 20634 ExecStop=/etc/init.d/nginx stop (code=exited, status=0/SUCCESS)\n  Process: 20640 ExecStart=/etc/init.d/nginx start (code=exited, status=1/FAILURE)\n\nApr 24 11:39:51 www nginx[20640]: nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)\n";

#[test]
fn a_unit_whose_stop_succeeded_before_the_failed_start() {
    let f = one(NGINX_UNIT);
    assert_eq!(f.category, Category::StaleServingInstance);
    crate::testing::cites_line(&f, 4);
    let first_start = NGINX_UNIT.replace(
        "  Process: 20634 ExecStop=/etc/init.d/nginx stop (code=exited, status=0/SUCCESS)\n",
        "",
    );
    assert_eq!(one(&first_start).category, Category::PortInUse);
    let failed_stop = NGINX_UNIT.replace("status=0/SUCCESS", "status=1/FAILURE");
    assert_eq!(one(&failed_stop).category, Category::PortInUse);
    let other_writer = NGINX_UNIT.replace("nginx[20640]", "nginx[31337]");
    assert_eq!(one(&other_writer).category, Category::PortInUse);
}

/// filewatcher/filewatcher#42 (reduced): a traceback cut inside the frame
/// that binds counts as the failed bind only after the console said which
/// port its server served.
#[test]
fn a_traceback_cut_in_bind_after_the_port_was_served() {
    let frames = "Traceback (most recent call last):\n  File \"/usr/lib/python2.7/SocketServer.py\", line 434, in server_bind\n    self.socket.bind(self.server_address)\n  File \"/usr/lib/python2.7/socket.py\", line 224, in meth\n";
    let served = format!("Serving HTTP on 0.0.0.0 port 8000 ...\n{frames}");
    let f = one(&served);
    assert_eq!(f.category, Category::StaleServingInstance);
    assert!(f.title.contains("8000"), "{}", f.title);
    // No port said before it: a bind cut short says nothing.
    assert!(findings_of("address-already-in-use", frames).is_empty());
    // The exception's own line after it: not cut, no bind failure said.
    let ended = format!("{served}    return getattr(self._sock,name)(*args)\nKeyboardInterrupt\n");
    assert!(findings_of("address-already-in-use", &ended).is_empty());
}

/// ONLYOFFICE/Docker-DocumentServer#39 (reduced): a detached run published
/// the host port before the run whose publish failed. An earlier run in the
/// foreground (`--rm -it`, gone when it returned) holds nothing.
#[test]
fn an_earlier_detached_run_published_the_same_port() {
    let text = "sudo docker run -i -t -d -p 8080:80 onlyoffice/documentserver\nsudo docker run -i -t -d -p 8080:80 -v /app/onlyoffice/DocumentServer/logs:/var/log/onlyoffice onlyoffice/documentserver\ndocker: Error response from daemon: driver failed programming external connectivity on endpoint loving_shaw (ac23a807cb82ab29742b0fcacb2eab4b48e26858d34c4f5966ba0796aa64995f): Bind for 0.0.0.0:8080 failed: port is already allocated.\n";
    let f = one(text);
    assert_eq!(f.category, Category::StaleServingInstance);
    crate::testing::cites_line(&f, 1);
    let foreground = text.replacen("-i -t -d -p", "--rm -it -p", 1);
    assert_eq!(one(&foreground).category, Category::PortInUse);
    let other_port = text.replacen("-d -p 8080:80", "-d -p 8081:80", 1);
    assert_eq!(one(&other_port).category, Category::PortInUse);
}
