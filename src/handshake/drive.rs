//! The handshake's shell: the one piece that owns the transport until the
//! channel is made. It sends what the machine's stages make, reads what
//! they ask for, all under one deadline, and tells the peer why when a
//! stage refuses; the stages themselves (`exchange`, `proof`) do no I/O.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    time::{Instant, Sleep},
};
use tracing::debug;

use super::{
    early::{self, Clock},
    encrypt::EncryptConfig,
    exchange::{Next, SetupSent},
    proof::{EarlyOutcome, Established, Rejected},
    Negotiated,
};
use crate::{
    error::{Error, Repr},
    frame::{Frame, FrameKind},
    record::{RecordConfig, RecordIo, Secured},
    terms::{EarlyData, PeerId},
};

/// What the shell needs beyond the machine's first stage.
pub(crate) struct Drive {
    pub(crate) timeout: Duration,
    pub(crate) max_setup_size: usize,
    pub(crate) records: Option<RecordConfig>,
    /// A dialer's encryption: it makes keys (and a box for its next early
    /// data to `pin`) while it waits.
    pub(crate) dialer_spare: Option<(Arc<EncryptConfig>, Option<PeerId>)>,
}

/// `work`'s output, or `None` if `timer` fires first.
async fn before<F: Future>(timer: Pin<&mut Sleep>, work: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = work => Some(out),
        () = timer => None,
    }
}

/// Runs the handshake over `io` from `sent` (our Setup made): the Setups
/// cross, then the proofs, each wait under the handshake's deadline.
pub(crate) async fn run<IO>(io: IO, sent: SetupSent, drive: Drive) -> Result<Negotiated<IO>, Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let deadline = started + drive.timeout;
    let mut io = RecordIo::new(io, drive.max_setup_size);
    // One timer for the whole handshake (each timer registered can cost the
    // runtime a wake-up of its I/O driver).
    let mut timer = Box::pin(tokio::time::sleep_until(deadline));
    // Early data we sent may have been acted on whatever the acceptor
    // says: a copy can have reached it first (and been accepted) while ours
    // was refused as seen, and a refused one can be replayed within its
    // window. A handshake that fails after it went leaves it in doubt.
    let in_doubt = sent.early_sent();
    let outcome = steps(&mut io, sent, &drive, timer.as_mut()).await;
    match outcome {
        Ok(established) => {
            let learned = established.learned;
            let (first, early) = match established.early {
                EarlyOutcome::Accepted(payload) => (payload, EarlyData::Accepted),
                EarlyOutcome::Sent { accepted: true } => (bytes::Bytes::new(), EarlyData::Accepted),
                EarlyOutcome::Sent { accepted: false } | EarlyOutcome::Refused => {
                    (bytes::Bytes::new(), EarlyData::Refused)
                }
                EarlyOutcome::None => (bytes::Bytes::new(), EarlyData::None),
            };
            let channel = io.into_channel(Secured {
                agreement: established.agreement,
                peer: established.peer,
                keys: established.keys,
                key_update: established.key_update,
                records: drive.records,
                first,
                early,
                handshake_time: started.elapsed(),
            });
            Ok(Negotiated::new(channel, learned))
        }
        Err(rejected) => {
            debug!(error = %rejected.error(), "handshake failed");
            if let Some(close) = rejected.close_record() {
                io.abort_with(close).await;
            }
            let error = rejected.into_error();
            Err(if in_doubt {
                error.with_early_data_in_doubt()
            } else {
                error
            })
        }
    }
}

/// The waits and the stages, in order.
async fn steps<IO>(
    io: &mut RecordIo<IO>,
    sent: SetupSent,
    drive: &Drive,
    mut timer: Pin<&mut Sleep>,
) -> Result<Established, Rejected>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let timeout = drive.timeout;
    let timed_out = || -> Error { Repr::HandshakeTimeout(timeout).into() };
    // Both Setups cross: ours at once, without waiting for the peer's.
    io.queue_frame(sent.frame());
    let exchanged = wait(drive, timer.as_mut(), async {
        io.flush().await?;
        io.read_frame().await
    })
    .await;
    let frame = match exchanged {
        Some(Ok(frame)) => frame,
        // (In the clear, if the error warrants telling the peer: there
        // are no keys yet.)
        Some(Err(err)) => return Err(Rejected::in_the_clear(err)),
        None => return Err(Rejected::in_the_clear(timed_out())),
    };
    let agreed = sent.receive(frame)?;
    debug!(version = agreed.agreement().version(), suite = %agreed.agreement().suite(), "setup agreed");
    io.agreed(agreed.agreement(), agreed.proofs_follow());
    let sent = match agreed.proceed(Clock::read())? {
        Next::Established(established) => return Ok(*established),
        Next::AnswerEarly(record, mut established) => {
            // Our answer may follow our Auth at once.
            io.queue_frame(&record);
            let failed = match before(timer.as_mut(), io.flush()).await {
                Some(Ok(())) => {
                    debug!(peer = ?established.peer, "early data accepted");
                    return Ok(*established);
                }
                Some(Err(err)) => err,
                None => timed_out(),
            };
            return Err(Rejected::sealed(failed, established.keys.as_mut()));
        }
        Next::Prove(sent) => sent,
    };
    if !sent.record().is_empty() {
        io.queue_frame(sent.record());
    }
    let exchanged = wait(drive, timer.as_mut(), async {
        if let Err(err) = io.flush().await {
            // A peer that refused us and left may have said why first.
            return match io.read_frame().await {
                Ok(frame) if frame.kind == FrameKind::Close => Ok(frame),
                _ => Err(err),
            };
        }
        io.read_frame().await
    })
    .await;
    let frame: Frame = match exchanged {
        Some(Ok(frame)) => frame,
        Some(Err(err)) => return Err(sent.reject(err)),
        None => return Err(sent.reject(timed_out())),
    };
    let verified = sent.receive(frame)?;
    let mut authenticated = verified.authorize()?;
    let owed = match authenticated.owed_proof() {
        Ok(owed) => owed,
        Err(err) => return Err(authenticated.reject(err)),
    };
    if let Some(record) = owed {
        io.queue_frame(&record);
        match before(timer.as_mut(), io.flush()).await {
            Some(Ok(())) => {}
            Some(Err(err)) => return Err(authenticated.reject(err)),
            None => return Err(authenticated.reject(timed_out())),
        }
    }
    let established = authenticated.finish();
    debug!(peer = ?established.peer, suite = %established.agreement.suite(), "peer authenticated");
    Ok(established)
}

/// The inner connector's `connect`: a dialer that encrypts makes keys for
/// later handshakes while it waits for its transport.
pub(crate) async fn connecting<F: Future>(drive: &Drive, connect: F) -> F::Output {
    match &drive.dialer_spare {
        Some((config, _)) => config.ephemerals.while_waiting(connect, || false).await,
        None => connect.await,
    }
}

/// `work` under the deadline; a dialer that encrypts makes keys for later
/// handshakes (and a box for its next early data) while it waits.
async fn wait<F: Future>(drive: &Drive, timer: Pin<&mut Sleep>, work: F) -> Option<F::Output> {
    match &drive.dialer_spare {
        Some((config, pin)) => {
            let spare = {
                let (config, pin) = (config.clone(), *pin);
                move || early::prepare(&config, pin)
            };
            before(timer, config.ephemerals.while_waiting(work, spare)).await
        }
        None => before(timer, work).await,
    }
}
