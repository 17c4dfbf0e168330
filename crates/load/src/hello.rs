//! `boxoffice hello`: a plain axum hello-world, the baseline the status-poll benchmark
//! (`bench/waitroom.sh`) compares against. Same runtime as `serve`, nothing else: no state,
//! no middleware, no auth.

use axum::Router;
use axum::routing::get;

/// The hello-world application: `GET /` answers `Hello, World!`.
pub fn hello_app() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

/// Serves [`hello_app`] on `listener` until the process ends.
pub async fn serve_hello(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, hello_app()).await
}
