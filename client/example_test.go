package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/flashmend/flashmend/client"
	"github.com/flashmend/flashmend/client/clustertest"
)

// startCluster starts an in-process cluster for an example; a real
// program dials the endpoint `flashmend dev` prints (or its DIR/endpoint
// file).
func startCluster() (endpoint string, stop func()) {
	dir, err := os.MkdirTemp("", "flashmend-example-")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := clustertest.Start(ctx, dir, clustertest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return c.Endpoint(), func() {
		if err := c.Close(); err != nil {
			log.Print(err)
		}
		os.RemoveAll(dir)
	}
}

// Objects: put, get, stat, list and delete.
func Example() {
	endpoint, stop := startCluster()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, endpoint, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	photo := bytes.Repeat([]byte("pixels"), 50000) // 300000 bytes: 5 chunks
	if _, err := c.Put(ctx, "photos/cat.jpg", photo, nil); err != nil {
		log.Fatal(err)
	}
	info, err := c.Put(ctx, "photos/dog.jpg", photo, &client.PutOptions{Redundancy: client.ErasureCoded})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info)

	got, err := c.Get(ctx, "photos/cat.jpg")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same bytes:", bytes.Equal(got, photo))

	objects, err := c.List(ctx, "photos/")
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range objects {
		fmt.Println(o.Key, o.Size, o.Redundancy)
	}

	if err := c.Delete(ctx, "photos/cat.jpg"); err != nil {
		log.Fatal(err)
	}
	_, err = c.Stat(ctx, "photos/cat.jpg")
	fmt.Println("after delete, not found:", errors.Is(err, client.ErrNotFound))
	// Output:
	// photos/dog.jpg version 1 300000B ec
	// same bytes: true
	// photos/cat.jpg 300000 rep
	// photos/dog.jpg 300000 ec
	// after delete, not found: true
}

// The replicated key-value store the storage nodes host.
func ExampleClient_KV() {
	endpoint, stop := startCluster()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, endpoint, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	kv, err := c.KV(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kv.Close()

	for _, user := range []string{"ada", "grace", "linus"} {
		if err := kv.Put(ctx, []byte("user/"+user), []byte("active")); err != nil {
			log.Fatal(err)
		}
	}
	swapped, err := kv.CompareAndSet(ctx, []byte("user/linus"), []byte("active"), []byte("away"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("swapped:", swapped)
	if err := kv.Delete(ctx, []byte("user/grace")); err != nil {
		log.Fatal(err)
	}
	rows, err := kv.Scan(ctx, []byte("user/"), []byte("user0"), 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("%s=%s\n", r.Key, r.Value)
	}
	_, found, err := kv.Get(ctx, []byte("user/grace"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("grace found:", found)
	// Output:
	// swapped: true
	// user/ada=active
	// user/linus=away
	// grace found: false
}

// Streaming: an object larger than the client's memory window goes up
// from a reader and comes back through an io.Reader.
func ExampleClient_PutReader() {
	endpoint, stop := startCluster()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, endpoint, client.Options{WindowBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	video := bytes.Repeat([]byte("frame"), 1<<20) // 5 MiB, five times the window
	info, err := c.PutReader(ctx, "videos/talk.mp4", bytes.NewReader(video), int64(len(video)), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info)

	r, err := c.Open(ctx, "videos/talk.mp4")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		log.Fatal(err)
	}
	fmt.Println("same bytes:", bytes.Equal(got.Bytes(), video), "version", r.Info().Version)
	// Output:
	// videos/talk.mp4 version 1 5242880B rep
	// same bytes: true version 1
}
