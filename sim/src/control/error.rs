//! The control plane's error type, [`Error`].

/// Why a controller step or the control plane's start failed.
///
/// Messages are lowercase fragments that read after "failed to" in a chain; the `#[source]`
/// carries the kube error and is rendered once by whoever prints the chain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("failed to {verb} {object}")]
    Api {
        /// What was being done: `create`, `delete`, `patch status of`, `bind`…
        verb: &'static str,
        /// The object, as `kind ns/name`.
        object: String,
        /// What the API (or the transport) answered.
        #[source]
        source: kube::Error,
    },
    /// The API's discovery documents could not be read.
    #[error("failed to discover the served api resources")]
    Discovery(#[source] kube::Error),
    /// An object could not be turned into the JSON a request needs (a bug, not a user error).
    #[error("failed to encode {object} as json")]
    Encode {
        /// The object being encoded.
        object: String,
        /// The serializer's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// An informer stopped before it delivered its first list (the API server went away).
    #[error("the {resource} informer stopped before its first list")]
    InformerStopped {
        /// The plural resource name.
        resource: String,
    },
    /// An owner read fresh before adopting was gone or being deleted, so its cached copy is
    /// stale: upstream's RecheckDeletionTimestamp refuses the adoption and the whole sync.
    #[error("{object} has just been deleted; not adopting")]
    OwnerDeleted {
        /// The owner, as `kind ns/name`.
        object: String,
    },
    /// A legacy ServiceAccount token could not be signed.
    #[error("failed to sign a token for {object}")]
    Sign {
        /// The Secret, as `secret ns/name`.
        object: String,
        /// ring's reason.
        #[source]
        source: crate::api::auth::signing::SigningError,
    },
    /// A schedule in a CronJob could not be parsed.
    #[error("invalid schedule {schedule:?}")]
    Schedule {
        /// The schedule string.
        schedule: String,
        /// croner's reason.
        #[source]
        source: croner::errors::CronError,
    },
    /// A time zone named by a CronJob is unknown.
    #[error("unknown time zone {zone:?}")]
    TimeZone {
        /// The zone name.
        zone: String,
        /// jiff's reason.
        #[source]
        source: jiff::Error,
    },
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches the failed step to a kube result.
pub(crate) trait ApiContext<T> {
    /// Wraps the error in [`Error::Api`] naming `verb` and `object`.
    fn ctx(self, verb: &'static str, object: impl FnOnce() -> String) -> Result<T>;
}

impl<T> ApiContext<T> for std::result::Result<T, kube::Error> {
    fn ctx(self, verb: &'static str, object: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Api {
            verb,
            object: object(),
            source,
        })
    }
}

/// Whether a kube error is the API's 404 NotFound.
pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is the API's 409 (Conflict or AlreadyExists).
pub(crate) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409)
}

impl Error {
    /// Whether the failure is a 404 from the API (the object went away meanwhile).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { source, .. } if is_not_found(source))
    }

    /// Whether the failure is a 409 from the API (stale write or name taken).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source, .. } if is_conflict(source))
    }
}

/// Renders an error and its sources on one line, for logs.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        s.push_str(": ");
        s.push_str(&e.to_string());
        cur = e.source();
    }
    s
}
