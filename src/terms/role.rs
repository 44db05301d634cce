/// Which end of the connection we are. Both ends run the same code; the role
/// only orders the transcript, picks the key for each direction, and decides
/// whose preferences win (the acceptor's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// We opened the connection.
    Dialer,
    /// We accepted it.
    Acceptor,
}

impl Role {
    /// The other end's role.
    pub(crate) fn peer(self) -> Role {
        match self {
            Role::Dialer => Role::Acceptor,
            Role::Acceptor => Role::Dialer,
        }
    }

    /// The role byte of the identity proof: 0 for the dialer, 1 for the
    /// acceptor.
    pub(crate) fn wire(self) -> u8 {
        match self {
            Role::Dialer => 0,
            Role::Acceptor => 1,
        }
    }
}
