import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorBody, toErrorResponse } from '../requests/errors.js';

/**
 * Fastify answers a URL that does not decode (`%ff`) and a path parameter over the router's
 * length limit itself, before any hook or our error handler: this gives them our error envelope.
 */
export function answerFrameworkError(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const { body, headers } = toErrorResponse(err);
  void reply.code(body.statusCode).headers(headers).send(body);
}

/**
 * Bytes Node's HTTP parser refuses (a malformed request line or header, conflicting lengths,
 * headers over 16 KiB) never become a request; Fastify's default answer is JSON of another shape.
 * This answers in our envelope, then closes the connection as Node does.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, error, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'the request line and headers exceed 16 KiB']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request was not received in time']
        : [400, 'bad_request', 'the request is not valid HTTP'];
  const body: ErrorBody = { success: false, statusCode: status, error, message };
  const text = JSON.stringify(body);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  socket.destroy(err);
}
