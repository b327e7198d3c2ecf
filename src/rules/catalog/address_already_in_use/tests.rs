//! The rule's tests: its real samples and near misses.

fn pids(text: &str) -> Vec<u32> {
    let f = crate::testing::findings_of(super::META.id, text);
    assert_eq!(f.len(), 1, "{f:?}");
    f[0].entities.pids.iter().copied().collect()
}

/// The row of a socket listing on the port that failed to bind names
/// its holder: `netstat -putan`'s `427249/docker-proxy`
/// (fixtures/real/654, dockerd's `Bind for 0.0.0.0:8000 failed`) and
/// `lsof`'s `ollama  2233` (fixtures/real/662, Go's `bind: address
/// already in use`); a listener on another port names nobody.
#[test]
fn a_socket_listings_row_on_the_port_names_its_holder() {
    let text = "Error response from daemon: driver failed programming external connectivity on endpoint inference-basic-eth-pred (9c9f32a7ae6162b9394eef6cb3667a8ff4cec7ef3befaa5d1cfb294adf9b2f9f): Bind for 0.0.0.0:8000 failed: port is already allocated\n\
                \n\
                netstat -putan| grep -i \":8000\"\n\
                tcp        0      0 0.0.0.0:8000            0.0.0.0:*               LISTEN      427249/docker-proxy\n";
    assert_eq!(pids(text), [427249]);
    let text = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n\
                ollama  2233 ollama    3u  IPv4  37563      0t0  TCP localhost:11434 (LISTEN)\n";
    assert_eq!(pids(text), [2233]);
    // 654's failed bind (port 8000) beside 662's listener (11434).
    let other = "Error response from daemon: driver failed programming external connectivity on endpoint inference-basic-eth-pred (9c9f32a7ae6162b9394eef6cb3667a8ff4cec7ef3befaa5d1cfb294adf9b2f9f): Bind for 0.0.0.0:8000 failed: port is already allocated\n\
                 ollama  2233 ollama    3u  IPv4  37563      0t0  TCP localhost:11434 (LISTEN)\n";
    assert!(pids(other).is_empty());
}

/// fixtures/real/678: `ss -ltnp 'sport = :8080'` names local-ai, then a
/// relaunch's listen error is cut before its address and reason: the
/// listing's holder is named, at a lower confidence. The same cut line
/// with no listing, or beside a listing of several ports, is no finding
/// (the second port's `ollama` row is assembled in `ss`'s grammar, not
/// copied).
#[test]
fn a_cut_listen_error_beside_a_one_port_listing() {
    let ss = "State    Recv-Q   Send-Q     Local Address:Port       Peer Address:Port   Process\n\
              LISTEN   0        32768            0.0.0.0:8080            0.0.0.0:*       users:((\"local-ai\",pid=29489,fd=6))\n";
    let cut =
        "3:00PM FTL Error running the application error=\"failed to listen: listen tcp4 0.0.\n";
    let f = crate::testing::findings_of(super::META.id, &format!("{ss}{cut}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [29489]
    );
    assert!(f[0].title.contains("8080"), "{}", f[0].title);
    let whole = crate::testing::findings_of(
        super::META.id,
        &format!("{ss}Error: listen tcp 127.0.0.1:8080: bind: address already in use\n"),
    );
    assert!(f[0].confidence < whole[0].confidence);
    assert!(crate::testing::findings_of(super::META.id, cut).is_empty());
    let two = format!(
        "{ss}LISTEN   0        4096           127.0.0.1:11434           0.0.0.0:*       users:((\"ollama\",pid=2233,fd=3))\n{cut}"
    );
    assert!(crate::testing::findings_of(super::META.id, &two).is_empty());
}

/// EADDRINUSE by its number in any language, and the servers that say
/// it their own way: pyLoad's Flask under a German locale (batch U
/// 1303, `[Errno 98] Die Adresse wird bereits verwendet`), cheroot's
/// list of the addresses it tried (1307, the port read from it),
/// FastDeploy's own pre-bind check (1297, the port's name kept). Errno
/// 13 is no port in use.
#[test]
fn eaddrinuse_in_any_language_and_in_the_servers_own_words() {
    let one = |text: &str| {
        let mut f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{text}\n{f:#?}");
        f.remove(0)
    };
    one("OSError: [Errno 98] Die Adresse wird bereits verwendet\n");
    one("OSError: [Errno 98] Adresse déjà utilisée\n");
    let f = one(
        "OSError: No socket could be created -- (('127.0.0.1', 8000): [Errno 98] Die Adresse wird bereits verwendet)\n",
    );
    assert!(f.title.contains("8000"), "{}", f.title);
    let f = one("Exception: The parameter `metrics_port`:8001 is already in use.\n");
    assert!(f.title.contains("metrics_port 8001"), "{}", f.title);
    assert!(
        crate::testing::findings_of(super::META.id, "OSError: [Errno 13] Permission denied\n")
            .is_empty()
    );
}

/// CherryPy's autoreloader re-executing the process after it served
/// 8080, then Python 2.5's tuple error with no port (batch U 1309,
/// cherrypy/cherrypy#692): the port is the one it served, and the
/// holder its own previous incarnation, a stale serving instance.
#[test]
fn a_cherrypy_respawn_before_the_bind_is_the_previous_incarnation() {
    let served = "[10/Jun/2007:21:48:07] HTTP Serving HTTP on http://0.0.0.0:8080/\n";
    let respawn = "[10/Jun/2007:21:48:11] ENGINE Re-spawning ./server.py\n";
    let failed =
        "Exception in thread CPHTTPServer Thread-1:\nerror: (98, 'Address already in use')\n";
    let f = crate::testing::findings_of(super::META.id, &format!("{served}{respawn}{failed}"));
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].category, crate::rules::Category::StaleServingInstance);
    assert!(f[0].title.contains("8080"), "{}", f[0].title);
}

/// lgandx/Responder#306 (batch T 1229): Responder's servers
/// print no reason for a failed listen (a bare `except:`); beside
/// `netstat -tulpn`'s rows, nginx's master (737) holds 80 and 443,
/// the ports named. Alone, or beside a listener of another port
/// (apache2 on 8080), the line names no holder and is no finding.
#[test]
fn a_listen_error_with_no_reason_beside_its_ports_listener() {
    let errors = "[!] Error starting TCP server on port 80, check permissions or other servers running.\n\
                  [!] Error starting SSL server on port 443, check permissions or other servers running.\n\
                  [!] Error starting TCP server on port 21, check permissions or other servers running.\n";
    let netstat = "tcp        0      0 127.0.0.1:8080          0.0.0.0:*               LISTEN      704/apache2\n\
                   tcp        0      0 0.0.0.0:80              0.0.0.0:*               LISTEN      737/nginx: master p\n";
    let f = crate::testing::findings_of(super::META.id, &format!("{errors}{netstat}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [737]
    );
    assert!(f[0].title.contains("80"), "{}", f[0].title);
    assert!(crate::testing::findings_of(super::META.id, errors).is_empty());
    let apache = netstat.lines().next().unwrap_or_default();
    assert!(crate::testing::findings_of(super::META.id, &format!("{errors}{apache}\n")).is_empty());
}
