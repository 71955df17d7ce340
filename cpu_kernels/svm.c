/* SVMClassifier with support vectors in one call: each row's kernel values against every
 * support vector, libsvm's one-vs-one decision values and votes, and with Platt's
 * parameters the pairwise probabilities coupled into class probabilities (Wu, Lin & Weng's
 * method, libsvm's multiclass_probability), as onnxruntime's svmclassifier computes them:
 * kernels and decisions in double (an RBF kernel from the squared distance itself), the
 * probabilities in float32, sums in index order. At batch 1 the numpy path is a few dozen
 * numpy calls of a microsecond each; this is one. */
#include <math.h>
#include <stdint.h>
#include "isa.h"

enum { SVM_LINEAR = 0, SVM_POLY = 1, SVM_RBF = 2, SVM_SIGMOID = 3 };

typedef struct {
    const double *vectors;       /* [total, features] */
    const double *coef;          /* [classes - 1, total] */
    const double *rho;           /* [pairs] */
    const int64_t *starts;       /* [classes + 1]: class c's vectors are starts[c] .. */
    const float *prob_a, *prob_b; /* [pairs] each, or null: no probabilities */
    int64_t total, features, classes, kind;
    double gamma, coef0, degree;
} Svm;

static double kernel_value(const Svm *m, const double *x, const double *v) {
    double sum = 0.0;
    if (m->kind == SVM_RBF) {
        for (int64_t f = 0; f < m->features; f++) {
            const double d = x[f] - v[f];
            sum += d * d;
        }
        return exp(-m->gamma * sum);
    }
    for (int64_t f = 0; f < m->features; f++) sum += x[f] * v[f];
    if (m->kind == SVM_POLY) return pow(m->gamma * sum + m->coef0, m->degree);
    if (m->kind == SVM_SIGMOID) return tanh(m->gamma * sum + m->coef0);
    return sum;
}

/* One row's class probabilities from its pairwise ones r (r[i * k + j] = P(i over j)). */
static void couple(float *r, int64_t k, float *q, float *qp, float *p) {
    for (int64_t t = 0; t < k; t++) {
        p[t] = (float)(1.0 / (double)k);
        q[t * k + t] = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            if (j == t) continue;
            q[t * k + t] += r[j * k + t] * r[j * k + t];
            q[t * k + j] = -(r[j * k + t] * r[t * k + j]);
        }
    }
    const float eps = (float)(0.005 / (double)k);
    const int64_t iterations = k > 100 ? k : 100;
    for (int64_t it = 0; it < iterations; it++) {
        float pqp = 0.0f, worst = 0.0f;
        for (int64_t t = 0; t < k; t++) {
            qp[t] = 0.0f;
            for (int64_t j = 0; j < k; j++) qp[t] += q[t * k + j] * p[j];
            pqp += p[t] * qp[t];
        }
        for (int64_t t = 0; t < k; t++) {
            const float error = fabsf(qp[t] - pqp);
            if (error > worst) worst = error;
        }
        if (worst < eps) break;
        for (int64_t t = 0; t < k; t++) {
            const float qtt = q[t * k + t];
            const float diff = (-qp[t] + pqp) / qtt;
            p[t] += diff;
            const float scale = 1.0f + diff;
            pqp = (pqp + diff * (diff * qtt + 2.0f * qp[t])) / scale / scale;
            for (int64_t j = 0; j < k; j++) {
                qp[j] = (qp[j] + diff * q[t * k + j]) / scale;
                p[j] /= scale;
            }
        }
    }
}

/* The decision value of pair (i, j): two classes, one sum over every vector (their
 * coefficients are the first row throughout); more, the two classes' sums added after. */
static double decision(const Svm *m, const double *kernels, int64_t i, int64_t j, int64_t pair) {
    double a = 0.0, b = 0.0;
    for (int64_t s = m->starts[i]; s < m->starts[i + 1]; s++)
        a += kernels[s] * m->coef[(j - 1) * m->total + s];
    if (m->classes == 2) {
        for (int64_t s = m->starts[j]; s < m->starts[j + 1]; s++)
            a += kernels[s] * m->coef[i * m->total + s];
        return a + m->rho[pair];
    }
    for (int64_t s = m->starts[j]; s < m->starts[j + 1]; s++)
        b += kernels[s] * m->coef[i * m->total + s];
    return a + b + m->rho[pair];
}

/* Rows x [n, features]: label[i] the class with the most votes (the first on ties; two
 * classes: class 1 where the decision is <= 0), decisions[i] its pairs' decision values as
 * float32, and with Platt's parameters probabilities[i] its k class probabilities.
 * scratch: total + k + k^2 + k doubles. */
EXPORT void er_cpu_svm_classify(const Svm *m, const double *x, int64_t n, int64_t *label,
                                float *decisions, float *probabilities, double *scratch) {
    const int64_t k = m->classes, total = m->total, pairs = k * (k - 1) / 2;
    const float low = (float)1e-7, high = (float)(1.0 - 1e-7);
    double *kernels = scratch;
    int64_t *votes = (int64_t *)(scratch + total);
    float *r = (float *)(scratch + total + k), *q = r + k * k, *qp = q + k * k, *p = qp + k;
    for (int64_t row = 0; row < n; row++) {
        const double *xr = x + row * m->features;
        for (int64_t s = 0; s < total; s++)
            kernels[s] = kernel_value(m, xr, m->vectors + s * m->features);
        float *out = decisions + row * pairs;
        for (int64_t c = 0; c < k; c++) votes[c] = 0;
        int64_t pair = 0;
        for (int64_t i = 0; i < k; i++) {
            for (int64_t j = i + 1; j < k; j++, pair++) {
                const double sum = decision(m, kernels, i, j, pair);
                out[pair] = (float)sum;
                if (k == 2) {
                    label[row] = sum <= 0.0;
                } else {
                    votes[i] += sum > 0.0;
                    votes[j] += sum <= 0.0;
                }
            }
        }
        if (k > 2) {
            int64_t best = 0;
            for (int64_t c = 1; c < k; c++)
                if (votes[c] > votes[best]) best = c;
            label[row] = best;
        }
        if (!m->prob_a) continue;
        pair = 0;
        for (int64_t i = 0; i < k; i++) {
            for (int64_t j = i + 1; j < k; j++, pair++) {
                const float v = out[pair] * m->prob_a[pair] + m->prob_b[pair];
                const float e = 1.0f / (1.0f + expf(-fabsf(v)));
                float pij = 1.0f - (v < 0.0f ? 1.0f - e : e);
                pij = pij < low ? low : (pij > high ? high : pij);
                r[i * k + j] = pij;
                r[j * k + i] = 1.0f - pij;
            }
        }
        couple(r, k, q, qp, p);
        for (int64_t c = 0; c < k; c++) probabilities[row * k + c] = p[c];
    }
}
