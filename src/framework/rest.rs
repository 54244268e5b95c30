//! Raw requests of API paths that have no typed handle (discovery documents, `/version`), and
//! JSON patches (RFC 6902, which kube's typed `Patch` only sends with a feature this crate
//! leaves off), decoded into the type the path serves.

use serde::de::DeserializeOwned;

use super::{CaseError, Framework};

impl Framework {
    /// GETs `path` from the API server and decodes the answer as `T`.
    ///
    /// # Errors
    /// A failure naming the path: the request failed, or the answer is not a `T`.
    pub async fn get_path<T: DeserializeOwned>(&self, path: &str) -> Result<T, CaseError> {
        self.step(format!("requesting {path}"));
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| CaseError::failed(format!("building a GET of {path}: {e}")))?;
        let text = self
            .client()
            .request_text(req)
            .await
            .map_err(|e| CaseError::from(e).context(format!("fetching {path}")))?;
        serde_json::from_str(&text).map_err(|e| {
            CaseError::failed(format!(
                "{path} answered what is not a {}: {e}: {text}",
                std::any::type_name::<T>()
            ))
        })
    }

    /// Sends `patch` (an RFC 6902 JSON patch document) to `path` and decodes the patched
    /// object as `T`.
    ///
    /// # Errors
    /// A failure naming the path: the request failed, or the answer is not a `T`.
    pub async fn json_patch<T: DeserializeOwned>(&self, path: &str, patch: &serde_json::Value) -> Result<T, CaseError> {
        self.step(format!("JSON-patching {path} with {patch}"));
        let req = http::Request::patch(path)
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(patch.to_string().into_bytes())
            .map_err(|e| CaseError::failed(format!("building a JSON patch of {path}: {e}")))?;
        self.client()
            .request(req)
            .await
            .map_err(|e| CaseError::from(e).context(format!("JSON-patching {path}")))
    }
}
