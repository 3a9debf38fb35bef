/* SPDX-License-Identifier: Apache-2.0 */
/* transform: JPEG or PNG bytes -> uint8 RGB crop, with DCT-domain downscaling for JPEG. */
#include "config.h"

#include "trainer/data/transform.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <jpeglib.h>

struct dlt_decoder {
    tjhandle tj;
    uint8_t *buf;
    size_t cap;
    int buf_stb; /* buf is stb_image's (a PNG's pixels, taken over without a copy) */
    tjscalingfactor *factors;
    int nfactors;
    int last_num, last_denom;
    int poisoned; /* the last call failed inside libjpeg-turbo */
    int full;     /* decode whole images even for a crop (tests and benchmarks compare) */
    dlt_image_format last_format;
    uint64_t inflate_slack; /* dlt_decoder_inflate_slack */
};

/* Gives the pixel buffer back (to stb_image where it came from there). */
static void _release(dlt_decoder *d)
{
    if (d->buf_stb)
        stbi_image_free(d->buf);
    else
        free(d->buf);
    d->buf = NULL;
    d->cap = 0;
    d->buf_stb = 0;
}

dlt_image_format dlt_image_sniff(const uint8_t *p, size_t len)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return DLT_IMAGE_JPEG;
    if (len >= sizeof(png) && !memcmp(p, png, sizeof(png)))
        return DLT_IMAGE_PNG;
    return DLT_IMAGE_UNKNOWN;
}

dlt_image_format dlt_image_format_of_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || strchr(dot, '/'))
        return DLT_IMAGE_UNKNOWN;
    if (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))
        return DLT_IMAGE_JPEG;
    if (!strcasecmp(dot, ".png"))
        return DLT_IMAGE_PNG;
    return DLT_IMAGE_UNKNOWN;
}

const char *dlt_image_format_name(dlt_image_format f)
{
    return f == DLT_IMAGE_JPEG ? "JPEG" : f == DLT_IMAGE_PNG ? "PNG" : "unknown";
}

/* Formats other tools read that are not read here, named so that the message says what to convert
 * (NULL: not one of them; such bytes go to the JPEG decoder, whose message says what they start with). */
static const char *_other_format(const uint8_t *p, size_t len)
{
    if (len >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
        return "GIF";
    if (len >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        return "WebP";
    if (len >= 4 && (!memcmp(p, "II*\0", 4) || !memcmp(p, "MM\0*", 4)))
        return "TIFF";
    if (len >= 14 && p[0] == 'B' && p[1] == 'M')
        return "BMP";
    if (len >= 12 && !memcmp(p + 4, "ftyp", 4) && (!memcmp(p + 8, "heic", 4) || !memcmp(p + 8, "avif", 4)))
        return "HEIF/AVIF";
    if (len >= 4 && !memcmp(p, "8BPS", 4))
        return "Photoshop (PSD)";
    if (len >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '7')
        return "PNM (PPM/PGM)";
    return NULL;
}

void dlt_crop_random_resized(dlt_rng *r, int w, int h, dlt_crop *c)
{
    const double area = (double)w * h, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (0.08 + (1.0 - 0.08) * dlt_rng_uniform(r));
        double ratio = exp(lr0 + (lr1 - lr0) * dlt_rng_uniform(r));
        int cw = (int)lround(sqrt(target * ratio)), ch = (int)lround(sqrt(target / ratio));
        if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
            c->x = (int)dlt_rng_below(r, (uint32_t)(w - cw + 1));
            c->y = (int)dlt_rng_below(r, (uint32_t)(h - ch + 1));
            c->w = cw;
            c->h = ch;
            c->flip = (int)(dlt_rng_u32(r) & 1u);
            return;
        }
    }
    /* Fallback: the whole image, cut to the nearest allowed aspect ratio. */
    {
        double in_ratio = (double)w / h;
        int cw = w, ch = h;
        if (in_ratio < 3.0 / 4.0)
            ch = (int)lround(w / (3.0 / 4.0));
        else if (in_ratio > 4.0 / 3.0)
            cw = (int)lround(h * (4.0 / 3.0));
        c->w = cw > 0 ? cw : 1;
        c->h = ch > 0 ? ch : 1;
        c->x = (w - c->w) / 2;
        c->y = (h - c->h) / 2;
        c->flip = (int)(dlt_rng_u32(r) & 1u);
    }
}

void dlt_crop_center(int w, int h, double ratio, dlt_crop *c)
{
    /* Shorter side to out/ratio, then out x out: in original pixels a square of ratio x shorter. */
    int side = (int)lround(ratio * (w < h ? w : h));
    if (side < 1)
        side = 1;
    c->w = c->h = side;
    c->x = (w - side) / 2;
    c->y = (h - side) / 2;
    c->flip = 0;
}

/* Bilinear resize of an RGB crop (at least 2x2) to out x out, fixed point, for any growth and for
 * shrinks below 2x, where bilinear needs no prefilter (the DCT scale choice leaves most crops
 * there); stb_image_resize's general float path costs ~5x more. */
static void _resize_bilinear(const uint8_t *src, int sw, int sh, int stride, uint8_t *dst, int out)
{
    int xi[1024], xf[1024];
    for (int x = 0; x < out; x++) {
        /* Sample at pixel centres: (x + 0.5) * sw / out - 0.5, in 1/256 steps. */
        int p = (int)(((2 * x + 1) * (int64_t)sw * 256 / out - 256) / 2);
        if (p < 0)
            p = 0;
        xi[x] = p >> 8;
        xf[x] = p & 255;
        if (xi[x] >= sw - 1) {
            xi[x] = sw - 2;
            xf[x] = 256;
        }
    }
    for (int y = 0; y < out; y++) {
        int p = (int)(((2 * y + 1) * (int64_t)sh * 256 / out - 256) / 2), yi, yf;
        const uint8_t *r0, *r1;
        uint8_t *o = dst + (size_t)y * out * 3;
        if (p < 0)
            p = 0;
        yi = p >> 8;
        yf = p & 255;
        if (yi >= sh - 1) {
            yi = sh - 2;
            yf = 256;
        }
        r0 = src + (size_t)yi * stride;
        r1 = r0 + stride;
        for (int x = 0; x < out; x++) {
            const uint8_t *a = r0 + xi[x] * 3, *b = r1 + xi[x] * 3;
            int fx = xf[x];
            for (int k = 0; k < 3; k++) {
                int top = a[k] * (256 - fx) + a[k + 3] * fx, bot = b[k] * (256 - fx) + b[k + 3] * fx;
                o[x * 3 + k] = (uint8_t)((top * (256 - yf) + bot * yf + 32768) >> 16);
            }
        }
    }
}

dlt_decoder *dlt_decoder_create(void)
{
    dlt_decoder *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->tj = tjInitDecompress();
    d->factors = tjGetScalingFactors(&d->nfactors);
    d->inflate_slack = DLT_PNG_INFLATE_SLACK;
    if (!d->tj || !d->factors) {
        dlt_decoder_destroy(d);
        return NULL;
    }
    return d;
}

void dlt_decoder_destroy(dlt_decoder *d)
{
    if (!d)
        return;
    if (d->tj)
        tjDestroy(d->tj);
    _release(d);
    free(d);
}

void dlt_decoder_last_scale(const dlt_decoder *d, int *num, int *denom)
{
    *num = d->last_num;
    *denom = d->last_denom;
}

dlt_image_format dlt_decoder_last_format(const dlt_decoder *d)
{
    return d->last_format;
}

/* d->buf holds at least need bytes. */
static int _reserve(dlt_decoder *d, size_t need)
{
    if (d->buf_stb) /* not ours to grow */
        _release(d);
    if (need > d->cap) {
        uint8_t *nb = realloc(d->buf, need);
        if (!nb)
            return -ENOMEM;
        d->buf = nb;
        d->cap = need;
    }
    return 0;
}

static uint32_t _be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Whether every chunk of a PNG lies inside its len bytes, up to IEND. stb_image allocates an IDAT
 * chunk's stated length before it reads it: a few bytes claiming a 2 GiB chunk would take 2 GiB
 * (found by tests/fuzz). A file cut short is said so here, with where. */
static int _png_chunks_fit(const uint8_t *p, size_t len, dlt_err *err)
{
    size_t at = 8; /* after the signature */
    while (len - at >= 12) {
        uint32_t n = _be32(p + at);
        if (n > len - at - 12)
            return dlt_fail(err, -EINVAL,
                            "corrupt PNG data: the chunk at byte %zu claims %u bytes, %zu are left (a cut file?)", at,
                            n, len - at - 12);
        if (!memcmp(p + at + 4, "IEND", 4))
            return 0;
        at += 12 + (size_t)n;
    }
    return dlt_fail(err, -EINVAL, "corrupt PNG data: no end chunk in its %zu bytes (a cut file?)", len);
}

/* stb_image inflates a PNG's pixel data into a buffer it grows as long as the data goes on: deflate
 * reaches 1032:1, so a crafted file of 64 MiB could take 66 GB. Where the IDAT bytes could inflate
 * to more than twice the image's own size (every row's filter byte and Adam7's passes included)
 * plus d->inflate_slack, they are inflated here first, into a small scratch buffer, counting, and
 * the file is refused past that bound. The slack spares common photos the second inflate (it
 * costs a third of a PNG's decode time): a 500x375 photo's 0.4 MB of IDAT stays under it. Called
 * after _png_chunks_fit, with the size inside the limits; a header stb_image will refuse anyway
 * is left to it. */
static int _png_inflate_bound(const dlt_decoder *d, const uint8_t *p, size_t len, dlt_err *err)
{
    static const int channels[7] = {1, 0, 3, 1, 2, 0, 4}; /* by colour type */
    uint64_t w, h, bits, limit, idat = 0, out = 0;
    uint8_t scratch[32768];
    z_stream zs;
    size_t at = 8;
    int zr = Z_OK;
    if (len < 33 || _be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) || p[25] > 6 || !channels[p[25]])
        return 0;
    w = _be32(p + 16);
    h = _be32(p + 20);
    bits = (uint64_t)channels[p[25]] * p[24];
    limit = 2 * h * ((w * bits + 7) / 8 + 1) + 1024;
    /* _png_chunks_fit saw every chunk up to IEND inside the file */
    for (at = 8; memcmp(p + at + 4, "IEND", 4); at += 12 + (size_t)_be32(p + at))
        if (!memcmp(p + at + 4, "IDAT", 4))
            idat += _be32(p + at);
    if (idat * 1032 <= limit + d->inflate_slack)
        return 0;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit(&zs) != Z_OK)
        return dlt_fail(err, -ENOMEM, "%s", "out of memory decoding (zlib)");
    for (at = 8; memcmp(p + at + 4, "IEND", 4) && zr == Z_OK; at += 12 + (size_t)_be32(p + at)) {
        if (memcmp(p + at + 4, "IDAT", 4))
            continue;
        zs.next_in = (Bytef *)(uintptr_t)(p + at + 8);
        zs.avail_in = (uInt)_be32(p + at);
        while (zr == Z_OK && zs.avail_in > 0 && out <= limit) {
            zs.next_out = scratch;
            zs.avail_out = sizeof(scratch);
            zr = inflate(&zs, Z_NO_FLUSH);
            out += sizeof(scratch) - zs.avail_out;
            if (zr == Z_BUF_ERROR) /* needs the next chunk */
                zr = Z_OK;
        }
        if (out > limit)
            break;
    }
    inflateEnd(&zs);
    if (out > limit)
        return dlt_fail(err, -EINVAL,
                        "corrupt PNG data: its pixel data inflates to more than %llu bytes, twice what a %llux%llu "
                        "image of %llu bits a pixel holds",
                        (unsigned long long)limit, (unsigned long long)w, (unsigned long long)h,
                        (unsigned long long)bits);
    return 0; /* within the bound, or damaged: stb_image says what */
}

/* A PNG, whole, into d->buf as 8-bit RGB (w x h): stb_image expands palettes and gray, reduces 16-bit
 * samples to their high byte (v >> 8) and drops alpha (req_comp 3), as PIL's convert("RGB") does.
 * The size is read first, so that an image over the limits is refused before any allocation. */
static int _decode_png(dlt_decoder *d, const uint8_t *png, size_t len, int *w, int *h, dlt_err *err)
{
    int comp = 0;
    stbi_uc *img;
    *w = *h = 0;
    if (len > (size_t)INT32_MAX)
        return dlt_fail(err, -EINVAL, "%s", "file too large");
    if (_png_chunks_fit(png, len, err) != 0)
        return -EINVAL;
    if (!stbi_info_from_memory(png, (int)len, w, h, &comp))
        return dlt_fail(err, -EINVAL, "corrupt PNG data: %s", stbi_failure_reason() ? stbi_failure_reason() : "?");
    if (*w < 1 || *h < 1 || *w > DLT_IMAGE_MAX_SIDE || *h > DLT_IMAGE_MAX_SIDE ||
        (uint64_t)*w * *h > DLT_IMAGE_MAX_PIXELS)
        return dlt_fail(err, -EINVAL, "image of %dx%d pixels is over the limits (%d pixels a side, %u in all)", *w, *h,
                        DLT_IMAGE_MAX_SIDE, DLT_IMAGE_MAX_PIXELS);
    if (_png_inflate_bound(d, png, len, err) != 0)
        return -EINVAL;
    img = stbi_load_from_memory(png, (int)len, w, h, &comp, 3);
    if (!img)
        return dlt_fail(err, -EINVAL, "corrupt PNG data: %s", stbi_failure_reason() ? stbi_failure_reason() : "?");
    /* stb_image's pixels become the buffer: no second copy of a large image. */
    _release(d);
    d->buf = img;
    d->cap = (size_t)*w * *h * 3;
    d->buf_stb = 1;
    d->last_num = d->last_denom = 1;
    return 0;
}

/* The content's format, with an error for bytes that are an image of a format not read here. */
static int _format(const uint8_t *p, size_t len, dlt_image_format *f, dlt_err *err)
{
    const char *other;
    *f = dlt_image_sniff(p, len);
    if (*f == DLT_IMAGE_UNKNOWN && (other = _other_format(p, len)) != NULL)
        return dlt_fail(err, -EINVAL, "a %s image, which is not read here (JPEG and PNG are): convert it to JPEG",
                        other);
    return 0;
}

static int _header(dlt_decoder *d, const uint8_t *jpeg, size_t len, int *w, int *h, int *cmyk, dlt_err *err)
{
    int subsamp, cs;
    /* libjpeg-turbo 2.1: after a failed call, the next tjDecompressHeader3 on the same handle may
     * report success without setting the size. A fresh handle after every failure avoids it. */
    if (d->poisoned) {
        tjhandle fresh = tjInitDecompress();
        if (!fresh)
            return dlt_fail(err, -EINVAL, "%s", "cannot create a JPEG decoder");
        tjDestroy(d->tj);
        d->tj = fresh;
        d->poisoned = 0;
    }
    *w = *h = 0;
    if (len < 4 || len > (size_t)INT32_MAX)
        return dlt_fail(err, -EINVAL, "%s", len < 4 ? "empty or truncated file" : "file too large");
    if (tjDecompressHeader3(d->tj, jpeg, (unsigned long)len, w, h, &subsamp, &cs) != 0) {
        d->poisoned = 1;
        return dlt_fail(err, -EINVAL, "not a readable JPEG: %s", tjGetErrorStr2(d->tj));
    }
    /* libjpeg-turbo may accept a header cut before the frame (a file of a few bytes) and give no
     * size: that is a truncated file, not an odd image. */
    if (*w < 1 || *h < 1) {
        d->poisoned = 1;
        return dlt_fail(err, -EINVAL, "truncated or not a JPEG (%zu bytes, no image size in its header)", len);
    }
    if (*w > DLT_IMAGE_MAX_SIDE || *h > DLT_IMAGE_MAX_SIDE || (uint64_t)*w * *h > DLT_IMAGE_MAX_PIXELS) {
        return dlt_fail(err, -EINVAL, "image of %dx%d pixels is over the limits (%d pixels a side, %u in all)", *w, *h,
                        DLT_IMAGE_MAX_SIDE, DLT_IMAGE_MAX_PIXELS);
    }
    *cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    return 0;
}

/* Decodes at DCT scale num/denom into d->buf as RGB (sw x sh). */
static int _decode_scaled(dlt_decoder *d, const uint8_t *jpeg, size_t len, int w, int h, int cmyk, int num, int denom,
                          int *sw, int *sh, dlt_err *err)
{
    tjscalingfactor f = {num, denom};
    size_t need;
    *sw = TJSCALED(w, f);
    *sh = TJSCALED(h, f);
    need = (size_t)*sw * *sh * (cmyk ? 4 : 3);
    if (_reserve(d, need) != 0)
        return dlt_fail(err, -EINVAL, "%s", "out of memory decoding");
    /* Warnings (truncated data, corrupt segments) are errors: such an image is skipped, not used. */
    if (tjDecompress2(d->tj, jpeg, (unsigned long)len, d->buf, *sw, 0, *sh, cmyk ? TJPF_CMYK : TJPF_RGB,
                      TJFLAG_STOPONWARNING | TJFLAG_FASTDCT) != 0) {
        d->poisoned = 1;
        return dlt_fail(err, -EINVAL, "corrupt JPEG data: %s", tjGetErrorStr2(d->tj));
    }
    if (cmyk) {
        /* Adobe CMYK JPEGs store inverted values: R = C K / 255, etc. In place, 4 -> 3 bytes. */
        for (size_t p = 0; p < (size_t)*sw * *sh; p++) {
            const uint8_t *q = d->buf + 4 * p;
            uint8_t rgb[3] = {(uint8_t)(q[0] * q[3] / 255), (uint8_t)(q[1] * q[3] / 255), (uint8_t)(q[2] * q[3] / 255)};
            memcpy(d->buf + 3 * p, rgb, 3);
        }
    }
    d->last_num = num;
    d->last_denom = denom;
    return 0;
}

/* libjpeg errors and warnings end the decode through a jump (warnings too: corrupt data is
 * refused, as TJFLAG_STOPONWARNING does for the whole-image path). */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} _jpeg_err;

static void _jpeg_error_exit(j_common_ptr ci)
{
    _jpeg_err *e = (_jpeg_err *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jump, 1);
}

static void _jpeg_emit(j_common_ptr ci, int level)
{
    if (level < 0) /* a warning: corrupt or truncated data */
        _jpeg_error_exit(ci);
}

static void _jpeg_output(j_common_ptr ci)
{
    (void)ci;
}

/* Decodes at DCT scale num/denom only the rows y0 .. y0+ch-1 and the iMCU columns that cover
 * x0 .. x0+cw-1 (libjpeg-turbo's jpeg_skip_scanlines and jpeg_crop_scanline: rows above the crop
 * are entropy-decoded but not transformed, rows below are not read at all). The crop's first
 * pixel is at d->buf + *rx * 3, rows *stride bytes apart. RGB output (grayscale expanded). */
static int _decode_region(dlt_decoder *d, const uint8_t *jpeg, size_t len, int num, int denom, int x0, int y0, int cw,
                          int ch, int *rx, int *stride, dlt_err *err)
{
    struct jpeg_decompress_struct ci;
    _jpeg_err je;
    volatile int created = 0;
    JDIMENSION xoff = (JDIMENSION)x0, width = (JDIMENSION)cw;
    memset(&ci, 0, sizeof(ci));
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = _jpeg_error_exit;
    je.pub.emit_message = _jpeg_emit;
    je.pub.output_message = _jpeg_output;
    je.msg[0] = 0;
    if (setjmp(je.jump)) {
        if (created)
            jpeg_destroy_decompress(&ci);
        return dlt_fail(err, -EINVAL, "corrupt JPEG data: %s", je.msg);
    }
    jpeg_create_decompress(&ci);
    created = 1;
    jpeg_mem_src(&ci, jpeg, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    ci.scale_num = (unsigned)num;
    ci.scale_denom = (unsigned)denom;
    ci.out_color_space = JCS_RGB;
    ci.dct_method = JDCT_IFAST;
    jpeg_start_decompress(&ci);
    if ((int)ci.output_width < x0 + cw || (int)ci.output_height < y0 + ch) {
        jpeg_destroy_decompress(&ci);
        return dlt_fail(err, -EINVAL, "%s", "crop outside the scaled image");
    }
    jpeg_crop_scanline(&ci, &xoff, &width);
    if (_reserve(d, (size_t)width * 3 * (size_t)ch) != 0) {
        jpeg_destroy_decompress(&ci);
        return dlt_fail(err, -EINVAL, "%s", "out of memory decoding");
    }
    if (y0 > 0 && jpeg_skip_scanlines(&ci, (JDIMENSION)y0) != (JDIMENSION)y0) {
        jpeg_destroy_decompress(&ci);
        return dlt_fail(err, -EINVAL, "%s", "corrupt JPEG data: cannot skip to the crop");
    }
    for (int row = 0; row < ch;) {
        JSAMPROW p = d->buf + (size_t)row * width * 3;
        JDIMENSION got = jpeg_read_scanlines(&ci, &p, 1);
        if (got != 1) {
            jpeg_destroy_decompress(&ci);
            return dlt_fail(err, -EINVAL, "%s", "corrupt JPEG data: rows missing");
        }
        row++;
    }
    jpeg_abort_decompress(&ci); /* the rows below the crop are not needed */
    jpeg_destroy_decompress(&ci);
    *rx = x0 - (int)xoff;
    *stride = (int)width * 3;
    d->last_num = num;
    d->last_denom = denom;
    return 0;
}

void dlt_decoder_decode_whole(dlt_decoder *d, int on)
{
    d->full = on;
}

void dlt_decoder_inflate_slack(dlt_decoder *d, uint64_t bytes)
{
    d->inflate_slack = bytes;
}

int dlt_decode_rgb(dlt_decoder *d, const uint8_t *jpeg, size_t len, const uint8_t **rgb, int *w, int *h, dlt_err *err)
{
    int cmyk, sw, sh, rc;
    dlt_image_format f;
    if ((rc = _format(jpeg, len, &f, err)) != 0)
        return rc;
    if (f == DLT_IMAGE_PNG)
        rc = _decode_png(d, jpeg, len, w, h, err);
    else if ((rc = _header(d, jpeg, len, w, h, &cmyk, err)) == 0)
        rc = _decode_scaled(d, jpeg, len, *w, *h, cmyk, 1, 1, &sw, &sh, err);
    if (rc != 0)
        return rc;
    d->last_format = f == DLT_IMAGE_PNG ? DLT_IMAGE_PNG : DLT_IMAGE_JPEG;
    *rgb = d->buf;
    return 0;
}

static int _decode_transform(dlt_decoder *d, const uint8_t *jpeg, size_t len, int out, int train, dlt_rng *r,
                             uint8_t *dst, dlt_err *err);

int dlt_decode_transform(dlt_decoder *d, const uint8_t *jpeg, size_t len, int out, int train, dlt_rng *r, uint8_t *dst,
                         dlt_err *err)
{
    int rc = _decode_transform(d, jpeg, len, out, train, r, dst, err);
    /* A worker keeps its buffer for the next image, unless this one was a giant (a 10000x10000
     * PNG is 300 MB): the peak is the image's, not the worker's for the rest of the run. */
    if (d->cap > DLT_DECODE_KEEP_BYTES)
        _release(d);
    return rc;
}

static int _decode_transform(dlt_decoder *d, const uint8_t *jpeg, size_t len, int out, int train, dlt_rng *r,
                             uint8_t *dst, dlt_err *err)
{
    int w, h, sw = 0, sh = 0, num = 1, denom = 1, cmyk = 0, rc;
    dlt_crop c;
    const uint8_t *src;
    dlt_image_format f;

    if ((rc = _format(jpeg, len, &f, err)) != 0)
        return rc;
    /* A PNG has no cheaper scale: decoded whole, once, before the crop is drawn (the crop depends
     * only on the size, so the random draws are those of a JPEG of that size). */
    if (f == DLT_IMAGE_PNG ? (rc = _decode_png(d, jpeg, len, &w, &h, err)) != 0
                           : (rc = _header(d, jpeg, len, &w, &h, &cmyk, err)) != 0)
        return rc;
    if (train)
        dlt_crop_random_resized(r, w, h, &c);
    else
        dlt_crop_center(w, h, 0.875, &c);
    /* The smallest DCT scale whose crop still covers out x out, among 1/1, 1/2, 1/4, 1/8: the
     * scales libjpeg-turbo has SIMD code for (3/8, 5/8, ... run slower than a full decode). */
    for (int i = 0; i < d->nfactors && f != DLT_IMAGE_PNG; i++) {
        tjscalingfactor sf = d->factors[i];
        if (sf.num != 1 || (sf.denom != 1 && sf.denom != 2 && sf.denom != 4 && sf.denom != 8))
            continue;
        if (TJSCALED(c.w, sf) >= out && TJSCALED(c.h, sf) >= out && (sf.num * denom < num * sf.denom)) {
            num = sf.num;
            denom = sf.denom;
        }
    }
    {
        tjscalingfactor sf = {num, denom};
        sw = TJSCALED(w, sf);
        sh = TJSCALED(h, sf);
    }
    {
        /* The crop in scaled pixels, kept inside the decoded image. */
        int x0 = (int)((int64_t)c.x * sw / w), y0 = (int)((int64_t)c.y * sh / h);
        int cw = (int)((int64_t)c.w * sw / w), ch = (int)((int64_t)c.h * sh / h), rx, stride;
        if (cw < 1)
            cw = 1;
        if (ch < 1)
            ch = 1;
        if (x0 + cw > sw)
            x0 = sw - cw;
        if (y0 + ch > sh)
            y0 = sh - ch;
        if (f == DLT_IMAGE_PNG) {
            src = d->buf + ((size_t)y0 * sw + (size_t)x0) * 3; /* decoded whole above, sw = w */
            stride = sw * 3;
        } else if (cmyk || d->full) {
            if ((rc = _decode_scaled(d, jpeg, len, w, h, cmyk, num, denom, &sw, &sh, err)) != 0)
                return rc;
            src = d->buf + ((size_t)y0 * sw + (size_t)x0) * 3;
            stride = sw * 3;
        } else {
            /* A margin left and right of the crop: libjpeg's chroma upsampling replicates the
             * region's edge columns where a whole decode sees their neighbours (rows need none:
             * skipped rows keep their upsampling context). tests/unit/test_data checks the
             * result equals a whole decode's, bit for bit. */
            int m = 16, rx0 = x0 > m ? x0 - m : 0, ry0 = y0;
            int rx1 = x0 + cw + m < sw ? x0 + cw + m : sw, ry1 = y0 + ch;
            if ((rc = _decode_region(d, jpeg, len, num, denom, rx0, ry0, rx1 - rx0, ry1 - ry0, &rx, &stride, err)) != 0)
                return rc;
            src = d->buf + (size_t)(y0 - ry0) * stride + (size_t)(rx + x0 - rx0) * 3;
        }
        /* Growing, or shrinking by less than 2x: bilinear (torchvision's RandomResizedCrop
         * interpolation; no prefilter is needed below 2x). Shrinking more: a box (area-average)
         * filter, anti-aliased and much faster than stb's default Mitchell. stb's triangle filter
         * trips an internal assertion on some shrink ratios, so it is not used. */
        stbir_filter filt = (cw >= out && ch >= out) ? STBIR_FILTER_BOX : STBIR_FILTER_DEFAULT;
        if (cw < 2 * out && ch < 2 * out && cw >= 2 && ch >= 2 && out <= 1024)
            _resize_bilinear(src, cw, ch, stride, dst, out);
        else if (!stbir_resize_uint8_generic(src, cw, ch, stride, dst, out, out, out * 3, 3, STBIR_ALPHA_CHANNEL_NONE,
                                             0, STBIR_EDGE_CLAMP, filt, STBIR_COLORSPACE_LINEAR, NULL))
            return dlt_fail(err, -EINVAL, "%s", "resize failed");
    }
    d->last_format = f == DLT_IMAGE_PNG ? DLT_IMAGE_PNG : DLT_IMAGE_JPEG;
    if (c.flip)
        for (int y = 0; y < out; y++) {
            uint8_t *row = dst + (size_t)y * out * 3;
            for (int a = 0, b = out - 1; a < b; a++, b--)
                for (int k = 0; k < 3; k++) {
                    uint8_t t = row[a * 3 + k];
                    row[a * 3 + k] = row[b * 3 + k];
                    row[b * 3 + k] = t;
                }
        }
    return 0;
}
