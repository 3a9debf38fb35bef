/* SPDX-License-Identifier: Apache-2.0 */
/* transform: image bytes -> a uint8 NHWC crop of out x out pixels, as torchvision prepares
 * ImageNet: training takes a RandomResizedCrop (area 8-100%, aspect 3/4-4/3) with a random
 * horizontal flip; evaluation resizes the shorter side to out/0.875 (256 for 224) and takes the
 * centre. The JPEG is decoded with libjpeg-turbo at the smallest DCT scale (1/8..1) that still
 * covers the crop at the output size, and only the crop's rows and iMCU columns are transformed;
 * a fixed-point bilinear (or stb_image_resize's box filter beyond 2x) does the rest. The format is
 * read from the bytes, never from a file name: JPEG (FF D8 FF) goes to libjpeg-turbo, PNG (89 'PNG'
 * 0D 0A 1A 0A) to stb_image, decoded whole (8 or 16 bits, gray, palette, with or without alpha)
 * to 8-bit RGB, alpha dropped as PIL's convert("RGB") does in torchvision's loader. Anything else
 * is refused, named (GIF, BMP, WebP, TIFF, ...) when it is a format worth naming.
 * Normalisation is left to the device (uint8 is a quarter of the bytes to move). */
#ifndef DLT_TRANSFORM_H
#define DLT_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/status.h"

#define DLT_IMAGE_MAX_SIDE 16384
#define DLT_IMAGE_MAX_PIXELS (100u * 1000u * 1000u)
/* A decoder's pixel buffer over this size is given back after the image (dlt_decode_transform). */
#define DLT_DECODE_KEEP_BYTES ((size_t)64 << 20)

typedef struct {
    int x, y, w, h; /* in the original image */
    int flip;
} dlt_crop;

/* torchvision's RandomResizedCrop parameters (10 tries, then the centre with the ratio clamped). */
void dlt_crop_random_resized(dlt_rng *r, int w, int h, dlt_crop *c);
/* Resize-to-(out/ratio)-then-centre-crop-out, expressed as a crop of the original. */
void dlt_crop_center(int w, int h, double ratio, dlt_crop *c);

typedef struct dlt_decoder dlt_decoder;

/* What an image's bytes are; DLT_IMAGE_UNKNOWN also for a file name with neither extension. */
typedef enum { DLT_IMAGE_UNKNOWN = 0, DLT_IMAGE_JPEG = 1, DLT_IMAGE_PNG = 2 } dlt_image_format;

/* The format of the len bytes at p, from their first bytes (magic numbers). */
dlt_image_format dlt_image_sniff(const uint8_t *p, size_t len);
/* The format a file name promises: .jpg/.jpeg -> JPEG, .png -> PNG (any case); else UNKNOWN. */
dlt_image_format dlt_image_format_of_name(const char *name);
/* "JPEG", "PNG" or "unknown". */
const char *dlt_image_format_name(dlt_image_format f);

dlt_decoder *dlt_decoder_create(void);
void dlt_decoder_destroy(dlt_decoder *d);

/* Decodes jpeg (len bytes of JPEG or PNG, told apart by content) and writes out x out x 3 RGB to dst. train: random
 * crop and flip from r; else the centre crop. Returns 0, or -EINVAL with err naming what is wrong with the data. */
int dlt_decode_transform(dlt_decoder *d, const uint8_t *jpeg, size_t len, int out, int train, dlt_rng *r, uint8_t *dst,
                         dlt_err *err);

/* Decodes the whole image to RGB at full size (CMYK converted, warnings refused). *rgb points into
 * the decoder's buffer, valid until its next use. */
int dlt_decode_rgb(dlt_decoder *d, const uint8_t *jpeg, size_t len, const uint8_t **rgb, int *w, int *h, dlt_err *err);

/* on: decode whole images and crop afterwards instead of decoding only the crop's region (tests
 * and benchmarks compare the two; the region is the default). */
void dlt_decoder_decode_whole(dlt_decoder *d, int on);

/* A PNG whose pixel data could inflate to more than twice its image's size plus this many bytes
 * has it inflated and counted first, and is refused past that (stb_image would grow its buffer as
 * far as the data goes). The default, DLT_PNG_INFLATE_SLACK, leaves common photos out of that
 * second inflate; tests lower it. */
#define DLT_PNG_INFLATE_SLACK (512ull << 20)
void dlt_decoder_inflate_slack(dlt_decoder *d, uint64_t bytes);

/* Last decode's DCT scale (numerator/denominator), for benchmarks (1/1 for PNG). */
void dlt_decoder_last_scale(const dlt_decoder *d, int *num, int *denom);
/* The format the last successful decode read (by content). */
dlt_image_format dlt_decoder_last_format(const dlt_decoder *d);

#endif
