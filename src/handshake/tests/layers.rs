//! The encryption layer's builder as a user sees it: the suites it keeps
//! and what its `Debug` shows (never a secret).

use super::*;

#[test]
fn suites_keep_their_order_once_each_and_debug_shows_what_the_layer_does() {
    use CipherSuite::*;

    let layer =
        EncryptLayer::new(ident(1)).suites([Aes256Gcm, XSalsa20Poly1305, Aes256Gcm, ChaCha20Poly1305]);
    assert_eq!(
        layer.config().suites,
        [Aes256Gcm, XSalsa20Poly1305, ChaCha20Poly1305]
    );
    let layer = layer.allow_plaintext().allow_plaintext();
    assert_eq!(
        layer.config().suites,
        [Aes256Gcm, XSalsa20Poly1305, ChaCha20Poly1305, Plaintext]
    );

    let shown = format!("{layer:?}");
    assert!(
        shown.starts_with("EncryptLayer { identity: Identity { peer_id: "),
        "{shown}"
    );
    assert!(shown.contains("authorizer: false, early_data: false"), "{shown}");
    let shown = format!("{:?}", layer.authorize(|_| true).accept_early_data());
    assert!(shown.contains("authorizer: true, early_data: true"), "{shown}");
}
