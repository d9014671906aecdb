//! How fast `object_store` alone streams one object (no modelfs, no copy): the client's
//! ceiling for remote reads. `get_rate ENDPOINT BUCKET KEY [RANGE_START]`, credentials from
//! AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; BUCKET `-` reads `ENDPOINT/KEY` as plain HTTP
//! (any store that serves objects by URL: fake-gcs-server, a public Azurite container, nginx).
//! Prints `bytes=N seconds=S`.

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (endpoint, bucket, key) = (&args[1], &args[2], &args[3]);
    let start: u64 = args.get(4).map_or(0, |s| s.parse().unwrap());
    let store: Box<dyn ObjectStore> = if bucket == "-" {
        let options = object_store::ClientOptions::new().with_allow_http(true);
        Box::new(
            object_store::http::HttpBuilder::new()
                .with_url(endpoint)
                .with_client_options(options)
                .build()
                .unwrap(),
        )
    } else {
        Box::new(
            AmazonS3Builder::from_env()
                .with_endpoint(endpoint)
                .with_bucket_name(bucket)
                .with_region("us-east-1")
                .with_allow_http(true)
                .build()
                .unwrap(),
        )
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let path = object_store::path::Path::from(key.as_str());
        let size = store.head(&path).await.unwrap().size;
        let t = std::time::Instant::now();
        let opts = GetOptions {
            range: Some(GetRange::Bounded(start..size)),
            ..Default::default()
        };
        let mut body = store.get_opts(&path, opts).await.unwrap().into_stream();
        let (mut n, mut chunks) = (0usize, 0usize);
        while let Some(c) = body.next().await {
            n += c.unwrap().len();
            chunks += 1;
        }
        println!(
            "bytes={n} seconds={:.3} chunks={chunks}",
            t.elapsed().as_secs_f64()
        );
    });
}
