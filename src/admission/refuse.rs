//! Telling a refused peer why: a close frame in the clear, which its
//! handshake reports as an unauthenticated close with `EXCESSIVE_LOAD`
//! and the reason, so that "wait and retry" is not mistaken for a broken
//! network.

use std::{io, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::Semaphore,
};

use crate::{error::Repr, record::clear_close_frame, Refusal};

/// Refused connections being told why at once (per server or admission
/// table); past it, a refused connection is closed without a word.
pub(crate) const MAX_REFUSING: usize = 256;
/// How long a refused connection is given to read why.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Tells the peer of `io` why it was refused, in a task of its own, if
/// fewer than [`MAX_REFUSING`] are being told at once (`refusing` counts
/// them); otherwise `io` is dropped, closing it without a word.
pub(crate) fn refuse_in_turn<IO>(refusing: &Arc<Semaphore>, io: IO, refusal: Refusal)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if let Ok(permit) = refusing.clone().try_acquire_owned() {
        tokio::spawn(async move {
            refuse(io, refusal).await;
            drop(permit);
        });
    }
}

/// Writes the close frame, then closes. What the peer sent meanwhile is
/// read and dropped, so that closing does not reset the connection before
/// the peer has read the frame.
async fn refuse<IO: AsyncRead + AsyncWrite + Unpin>(mut io: IO, refusal: Refusal) {
    let frame = clear_close_frame(&Repr::NotAdmitted(refusal).into());
    let told = async {
        io.write_all(&frame).await?;
        io.shutdown().await?;
        let mut sink = [0u8; 1024];
        while io.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    };
    match tokio::time::timeout(REFUSAL_LINGER, told).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "a refused peer was not told why: the transport failed")
        }
        Err(_) => tracing::debug!("a refused peer still sent at the linger's end; closed"),
    }
}
