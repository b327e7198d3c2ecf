//! A listen failure whose program prints no reason (Responder's servers).

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
